//! Readers of `/proc` and `/sys` files, each a small parser of one file.

use std::path::{Path, PathBuf};

/// The folder the kernel's files are read under: `/` on a real host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root(PathBuf);

impl Default for Root {
    fn default() -> Root {
        Root(PathBuf::from("/"))
    }
}

/// The host's CPU time since boot, summed over its CPUs (the `cpu` line of
/// `/proc/stat`), in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// Time some process (or the kernel for one) ran: user, nice, system,
    /// irq, softirq (guest time is inside user).
    pub busy: u64,
    /// Time the hypervisor gave to other guests while this one wanted it.
    pub steal: u64,
    /// Every field: busy, idle, iowait, steal.
    pub total: u64,
}

impl CpuTimes {
    /// `later − self`, field by field (a counter never goes back; a
    /// smaller later value reads as 0).
    pub fn until(&self, later: &CpuTimes) -> CpuTimes {
        CpuTimes {
            busy: later.busy.saturating_sub(self.busy),
            steal: later.steal.saturating_sub(self.steal),
            total: later.total.saturating_sub(self.total),
        }
    }
}

impl Root {
    pub fn new(path: impl Into<PathBuf>) -> Root {
        Root(path.into())
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub(crate) fn read(&self, file: &str) -> Option<String> {
        std::fs::read_to_string(self.0.join(file.trim_start_matches('/'))).ok()
    }

    /// The host's CPU time since boot (`/proc/stat`).
    pub fn cpu_times(&self) -> Option<CpuTimes> {
        parse_stat(&self.read("/proc/stat")?)
    }

    /// The CPU the rest of the host used over `sample` (the caller sleeps
    /// meanwhile), in cores: the busy time of `/proc/stat` less this
    /// process's own, over the wall time; and the seconds it covered.
    /// `None` without `/proc/stat`.
    pub fn foreign_cores(&self, sample: std::time::Duration) -> Option<(f64, f64)> {
        let (before, mine) = (self.cpu_times()?, self_cpu_seconds());
        let from = std::time::Instant::now();
        std::thread::sleep(sample);
        let after = self.cpu_times()?;
        let seconds = from.elapsed().as_secs_f64();
        let busy = before.until(&after).busy as f64 / ticks_per_second();
        let cores = ((busy - (self_cpu_seconds() - mine)) / seconds).max(0.0);
        Some((cores, seconds))
    }

    /// The 1-minute load average (`/proc/loadavg`).
    pub fn load_1m(&self) -> Option<f64> {
        self.read("/proc/loadavg")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    /// The CPUs the kernel has online (the `cpuN` lines of `/proc/stat`).
    pub fn online_cpus(&self) -> Option<usize> {
        let text = self.read("/proc/stat")?;
        let n = text
            .lines()
            .filter(|l| l.starts_with("cpu") && l[3..].starts_with(|c: char| c.is_ascii_digit()))
            .count();
        (n > 0).then_some(n)
    }

    /// Every CPU's current clock in MHz: cpufreq's `scaling_cur_freq` where
    /// the kernel has it, else `/proc/cpuinfo`'s `cpu MHz` (on a virtual
    /// machine often the nominal clock). Empty when neither says.
    pub fn cpu_mhz(&self) -> Vec<f64> {
        let mut out = Vec::new();
        for cpu in 0.. {
            let file = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq");
            match self.read(&file).and_then(|t| t.trim().parse::<f64>().ok()) {
                Some(khz) => out.push(khz / 1000.0),
                None => break,
            }
        }
        if out.is_empty() {
            if let Some(info) = self.read("/proc/cpuinfo") {
                out = info
                    .lines()
                    .filter(|l| l.starts_with("cpu MHz"))
                    .filter_map(|l| l.split(':').nth(1)?.trim().parse().ok())
                    .collect();
            }
        }
        out
    }

    /// The highest clock the OS reports for any CPU, in GHz, and where it
    /// was read: cpufreq's maximum where the kernel exposes it, else the
    /// largest `cpu MHz` in `/proc/cpuinfo` (on virtual machines often the
    /// nominal clock, which turbo can exceed).
    pub fn max_clock_ghz(&self) -> Option<(f64, &'static str)> {
        let cpufreq = self
            .read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
            .and_then(|text| text.trim().parse::<f64>().ok());
        if let Some(khz) = cpufreq {
            return Some((khz / 1e6, "cpufreq maximum"));
        }
        self.read("/proc/cpuinfo")?
            .lines()
            .filter(|l| l.starts_with("cpu MHz"))
            .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
            .reduce(f64::max)
            .map(|mhz| (mhz / 1000.0, "/proc/cpuinfo cpu MHz"))
    }

    /// A process's start time in clock ticks since boot (field 22 of
    /// `/proc/PID/stat`), or `None` when it does not exist (or has exited
    /// and been reaped). A zombie counts as gone.
    pub fn process_start_ticks(&self, pid: i64) -> Option<String> {
        let stat = self.read(&format!("/proc/{pid}/stat"))?;
        // `pid (comm) state ...`: comm may hold spaces and parentheses, so
        // the fields are counted from the last `)`.
        let rest = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // fields[0] is field 3 (state); field 22 is fields[19].
        if fields.first() == Some(&"Z") {
            return None;
        }
        fields.get(19).map(|s| (*s).to_string())
    }

    /// Pages swapped in and out since boot (`/proc/vmstat`).
    pub fn swapped_pages(&self) -> Option<u64> {
        let text = self.read("/proc/vmstat")?;
        let field = |name: &str| -> Option<u64> {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        };
        Some(field("pswpin ")? + field("pswpout ")?)
    }
}

/// The `cpu` line of `/proc/stat`.
fn parse_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    if f.len() < 4 {
        return None;
    }
    let busy = at(0) + at(1) + at(2) + at(5) + at(6);
    let steal = at(7);
    Some(CpuTimes {
        busy,
        steal,
        total: busy + at(3) + at(4) + steal,
    })
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 almost everywhere).
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// CPU time (user + system, seconds) of this process so far, all threads.
pub fn self_cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_SELF)
}

fn rusage_seconds(who: libc::c_int) -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct we own.
    if unsafe { libc::getrusage(who, usage.as_mut_ptr()) } != 0 {
        return 0.0;
    }
    // SAFETY: getrusage returned 0, so the struct is filled.
    let usage = unsafe { usage.assume_init() };
    timeval(usage.ru_utime) + timeval(usage.ru_stime)
}

/// What a reaped child used (`wait4`): itself and the descendants it
/// waited for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    pub user_seconds: f64,
    pub system_seconds: f64,
    /// Peak resident set size, bytes.
    pub max_rss_bytes: u64,
}

/// Reaps `pid` with wait4: its exit status and what it used. `pid` must be
/// an unreaped child of this process that nothing else waits for.
pub fn wait_with_usage(pid: libc::pid_t) -> std::io::Result<(std::process::ExitStatus, Usage)> {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    loop {
        // SAFETY: wait4 writes the status and the usage we own.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, usage.as_mut_ptr()) };
        if rc == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    // SAFETY: wait4 returned the pid, so it filled the usage.
    let usage = unsafe { usage.assume_init() };
    Ok((
        std::process::ExitStatus::from_raw(status),
        Usage {
            user_seconds: timeval(usage.ru_utime),
            system_seconds: timeval(usage.ru_stime),
            // Linux reports kilobytes.
            max_rss_bytes: (usage.ru_maxrss.max(0) as u64) * 1024,
        },
    ))
}

pub(crate) fn timeval(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn fake(files: &[(&str, &str)]) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        for (file, text) in files {
            let path = dir.path().join(file.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let root = Root::new(dir.path());
        (dir, root)
    }

    #[test]
    fn the_stat_line_splits_into_busy_steal_and_total() {
        let (_d, root) = fake(&[(
            "/proc/stat",
            "cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 50 5 25 500 10 3 2 7 0 0\n\
             cpu1 50 0 25 500 10 0 0 0 0 0\nintr 1 2\n",
        )]);
        let t = root.cpu_times().unwrap();
        assert_eq!(
            t,
            CpuTimes {
                busy: 160,
                steal: 7,
                total: 1187
            }
        );
        assert_eq!(root.online_cpus(), Some(2));
        let later = CpuTimes {
            busy: 260,
            steal: 7,
            total: 1387,
        };
        assert_eq!(t.until(&later).busy, 100);
    }

    #[test]
    fn the_highest_clock_and_a_start_time_are_read_from_the_root() {
        let (_d, root) = fake(&[
            (
                "/proc/cpuinfo",
                "cpu MHz\t\t: 2000.0\ncpu MHz\t\t: 2400.5\n",
            ),
            // comm with a space and a parenthesis: fields count from the last `)`.
            (
                "/proc/42/stat",
                "42 (a b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777 19 20",
            ),
            (
                "/proc/43/stat",
                "43 (zombie) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 5 6",
            ),
        ]);
        assert_eq!(
            root.max_clock_ghz(),
            Some((2.4005, "/proc/cpuinfo cpu MHz"))
        );
        assert_eq!(root.process_start_ticks(42).as_deref(), Some("777"));
        assert_eq!(root.process_start_ticks(43), None);
        assert_eq!(root.process_start_ticks(44), None);
        let (_d, root) = fake(&[(
            "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
            "3500000\n",
        )]);
        assert_eq!(root.max_clock_ghz(), Some((3.5, "cpufreq maximum")));
    }

    #[test]
    fn load_clocks_and_swap_are_read_and_missing_files_are_unknown() {
        let (_d, root) = fake(&[
            ("/proc/loadavg", "1.37 1.51 1.69 1/114 5543\n"),
            (
                "/proc/cpuinfo",
                "processor\t: 0\ncpu MHz\t\t: 2994.375\nprocessor\t: 1\ncpu MHz\t\t: 1200.0\n",
            ),
            ("/proc/vmstat", "nr_free_pages 1\npswpin 3\npswpout 4\n"),
        ]);
        assert_eq!(root.load_1m(), Some(1.37));
        assert_eq!(root.cpu_mhz(), vec![2994.375, 1200.0]);
        assert_eq!(root.swapped_pages(), Some(7));
        assert_eq!(root.cpu_times(), None);
        assert_eq!(root.online_cpus(), None);

        // cpufreq, where present, is the live clock and wins.
        let (_d, root) = fake(&[
            (
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq",
                "3400000\n",
            ),
            ("/proc/cpuinfo", "cpu MHz\t\t: 2994.375\n"),
        ]);
        assert_eq!(root.cpu_mhz(), vec![3400.0]);

        let (_d, empty) = fake(&[]);
        assert_eq!(
            (
                empty.load_1m(),
                empty.swapped_pages(),
                empty.cpu_mhz().len()
            ),
            (None, None, 0)
        );
    }

    #[test]
    fn this_hosts_files_are_read() {
        let root = Root::default();
        if Path::new("/proc/stat").exists() {
            assert!(root.cpu_times().unwrap().total > 0);
            assert!(root.online_cpus().unwrap() >= 1);
        }
        assert!(ticks_per_second() > 0.0);
    }
}
