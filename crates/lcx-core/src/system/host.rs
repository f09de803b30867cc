//! Which machine this is, as the kernel names it: its host name, this
//! boot, its CPU model, memory and OS. The runner's identity
//! (`store::liveness`), the experiment's fingerprint and the peak cache's
//! key all read them here, under a [`Root`], so a host is told apart one
//! way (and tests give it a folder of fake files).

use super::Root;

impl Root {
    /// A file's text trimmed, `None` when it is missing or blank.
    fn read_trimmed(&self, file: &str) -> Option<String> {
        let text = self.read(file)?;
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_string())
    }

    /// The kernel's host name (what `hostname` prints); `$HOSTNAME` where
    /// the kernel does not say.
    pub fn hostname(&self) -> Option<String> {
        self.read_trimmed("/proc/sys/kernel/hostname")
            .or_else(|| std::env::var("HOSTNAME").ok())
    }

    /// This boot's id: it changes with every boot, so a pid or a ceiling
    /// recorded under another boot id is not this boot's.
    pub fn boot_id(&self) -> Option<String> {
        self.read_trimmed("/proc/sys/kernel/random/boot_id")
    }

    /// The CPU's model name from `/proc/cpuinfo` (the first CPU's).
    pub fn cpu_model(&self) -> Option<String> {
        self.read("/proc/cpuinfo")?.lines().find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == "model name").then(|| value.trim().to_string())
        })
    }

    /// Total memory in bytes (`MemTotal` of `/proc/meminfo`).
    pub fn memory_bytes(&self) -> Option<i64> {
        let text = self.read("/proc/meminfo")?;
        let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }

    /// The OS as a fingerprint records it: `linux x86_64`, the
    /// distribution's `PRETTY_NAME` and the kernel's release, those found.
    pub fn os_description(&self) -> String {
        let pretty = self.read("/etc/os-release").and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        });
        let kernel = self.read_trimmed("/proc/sys/kernel/osrelease");
        let mut parts = vec![format!(
            "{} {}",
            std::env::consts::OS,
            std::env::consts::ARCH
        )];
        parts.extend(pretty);
        parts.extend(kernel.map(|k| format!("kernel {k}")));
        parts.join(", ")
    }
}

/// This host's name (the real root's), as every record names the host.
pub fn hostname() -> Option<String> {
    Root::default().hostname()
}

/// The variable that names the host in an experiment's fingerprint.
pub const HOSTNAME_ENV: &str = "LCX_HOSTNAME";

/// `$LCX_HOSTNAME` as it is set, without the white space around it (as
/// the kernel's name is read): `None` when unset or empty, `Err` (with its
/// text, lossily decoded) when it is not UTF-8. The session holds it to the
/// rule of names (one line of visible text, at most 200 characters;
/// `experiment::plan::check_name`) before anything is recorded, and
/// refuses a bad one.
pub fn hostname_override() -> Option<Result<String, String>> {
    let value = std::env::var_os(HOSTNAME_ENV).filter(|v| !v.is_empty())?;
    Some(match value.into_string() {
        Ok(text) => Ok(text.trim().to_string()),
        Err(raw) => Err(raw.to_string_lossy().into_owned()),
    })
}

/// The host name an experiment's fingerprint records: `$LCX_HOSTNAME` when
/// set, else the kernel's. A CI service gives each job a machine of a new
/// name; naming the runner's kind there (`LCX_HOSTNAME=gha-ubuntu-24.04`)
/// keeps its jobs one series in `lcx history`. The runner's identity and
/// each cell's host stay the kernel's name: they say where a process is.
pub fn recorded_hostname() -> Option<String> {
    match hostname_override() {
        Some(Ok(name)) => Some(name),
        _ => hostname(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_read_from_its_root() {
        let dir = tempfile::tempdir().unwrap();
        let put = |file: &str, text: &str| {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        put("proc/sys/kernel/hostname", "node-7\n");
        put("proc/sys/kernel/random/boot_id", "  \n");
        put(
            "proc/cpuinfo",
            "processor\t: 0\nmodel name\t: Some CPU @ 2.60GHz\nflags\t: fpu\n",
        );
        put(
            "proc/meminfo",
            "MemTotal:       24576000 kB\nMemFree: 1 kB\n",
        );
        let root = Root::new(dir.path());
        assert_eq!(root.hostname().as_deref(), Some("node-7"));
        // A blank boot id tells no boot apart.
        assert_eq!(root.boot_id(), None);
        assert_eq!(root.cpu_model().as_deref(), Some("Some CPU @ 2.60GHz"));
        assert_eq!(root.memory_bytes(), Some(24_576_000 * 1024));
        // No os-release and no kernel release: the OS and architecture only.
        let bare = format!("{} {}", std::env::consts::OS, std::env::consts::ARCH);
        assert_eq!(root.os_description(), bare);
        put(
            "etc/os-release",
            "NAME=X\nPRETTY_NAME=\"Debian GNU/Linux 13\"\n",
        );
        put("proc/sys/kernel/osrelease", "6.1.0-9\n");
        assert_eq!(
            root.os_description(),
            format!("{bare}, Debian GNU/Linux 13, kernel 6.1.0-9")
        );
    }
}
