//! Readers of the settings that make a machine noisy or quiet for a
//! benchmark (`lcx system show`): the CPU governor, turbo, SMT, isolated
//! CPUs, memory and swap, and each process's CPU time (to name what else
//! is running). `None` or empty where the host does not have the file.

use super::Root;

/// Memory and swap from `/proc/meminfo`, in KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub total_kib: u64,
    /// What programs can still get without swapping (`MemAvailable`).
    pub available_kib: u64,
    pub swap_total_kib: u64,
    pub swap_free_kib: u64,
}

impl Memory {
    pub fn swap_used_kib(&self) -> u64 {
        self.swap_total_kib.saturating_sub(self.swap_free_kib)
    }
}

/// Turbo (boost) as the kernel exposes it: the generic cpufreq switch
/// (`cpufreq/boost`, 1 = on) or intel_pstate's (`no_turbo`, 1 = off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turbo {
    /// On, as said by the file named.
    On(&'static str),
    Off(&'static str),
}

pub const BOOST_FILE: &str = "/sys/devices/system/cpu/cpufreq/boost";
pub const NO_TURBO_FILE: &str = "/sys/devices/system/cpu/intel_pstate/no_turbo";
pub const SMT_FILE: &str = "/sys/devices/system/cpu/smt/active";
pub const ISOLATED_FILE: &str = "/sys/devices/system/cpu/isolated";

/// One process's CPU time so far (`/proc/PID/stat`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessTime {
    pub pid: u32,
    /// Its parent's pid (0 for the kernel's own).
    pub ppid: u32,
    pub name: String,
    /// User + system, in clock ticks.
    pub ticks: u64,
}

impl Root {
    /// Each CPU's cpufreq governor (`cpuN/cpufreq/scaling_governor`), in
    /// CPU order. Empty without cpufreq (most virtual machines).
    pub fn governors(&self) -> Vec<String> {
        let mut cpus: Vec<u32> = std::fs::read_dir(self.path().join("sys/devices/system/cpu"))
            .map(|dir| {
                dir.filter_map(|e| {
                    let name = e.ok()?.file_name();
                    name.to_str()?.strip_prefix("cpu")?.parse().ok()
                })
                .collect()
            })
            .unwrap_or_default();
        cpus.sort_unstable();
        cpus.iter()
            .filter_map(|cpu| {
                let file = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor");
                Some(self.read(&file)?.trim().to_string())
            })
            .collect()
    }

    /// Whether the CPUs may run above their base clock.
    pub fn turbo(&self) -> Option<Turbo> {
        let flag = |file: &str| match self.read(file)?.trim() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        };
        match flag(BOOST_FILE) {
            Some(true) => return Some(Turbo::On(BOOST_FILE)),
            Some(false) => return Some(Turbo::Off(BOOST_FILE)),
            None => {}
        }
        flag(NO_TURBO_FILE).map(|no_turbo| match no_turbo {
            true => Turbo::Off(NO_TURBO_FILE),
            false => Turbo::On(NO_TURBO_FILE),
        })
    }

    /// Whether simultaneous multithreading (hyper-threading) is active.
    pub fn smt_active(&self) -> Option<bool> {
        match self.read(SMT_FILE)?.trim() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        }
    }

    /// The CPUs set aside from the scheduler (`isolcpus=`), as the kernel
    /// lists them (`2-3,6`); empty when none are.
    pub fn isolated_cpus(&self) -> Option<String> {
        Some(self.read(ISOLATED_FILE)?.trim().to_string())
    }

    /// Memory and swap (`/proc/meminfo`).
    pub fn memory(&self) -> Option<Memory> {
        let text = self.read("/proc/meminfo")?;
        let field = |name: &str| -> Option<u64> {
            text.lines().find_map(|l| {
                let rest = l.strip_prefix(name)?.strip_prefix(':')?;
                rest.split_whitespace().next()?.parse().ok()
            })
        };
        Some(Memory {
            total_kib: field("MemTotal")?,
            available_kib: field("MemAvailable")?,
            swap_total_kib: field("SwapTotal").unwrap_or(0),
            swap_free_kib: field("SwapFree").unwrap_or(0),
        })
    }

    /// Every process's CPU time so far; empty without `/proc`.
    pub fn process_times(&self) -> Vec<ProcessTime> {
        let Ok(dir) = std::fs::read_dir(self.path().join("proc")) else {
            return Vec::new();
        };
        dir.filter_map(|entry| {
            let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            parse_process_stat(pid, &self.read(&format!("/proc/{pid}/stat"))?)
        })
        .collect()
    }
}

/// `/proc/PID/stat`: `pid (name) state ppid … utime stime …`. The name may
/// hold spaces and parentheses, so the fields are counted from its last `)`.
fn parse_process_stat(pid: u32, text: &str) -> Option<ProcessTime> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // After the name: state is field 3 of the file, utime 14, stime 15.
    let ppid: u32 = fields.get(1)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(ProcessTime {
        pid,
        ppid,
        name,
        ticks: utime + stime,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::proc::tests::fake;

    #[test]
    fn governors_turbo_smt_and_isolation_are_read_per_file() {
        let (_d, root) = fake(&[
            (
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "powersave\n",
            ),
            (
                "/sys/devices/system/cpu/cpu10/cpufreq/scaling_governor",
                "performance\n",
            ),
            (
                "/sys/devices/system/cpu/cpu2/cpufreq/scaling_governor",
                "performance\n",
            ),
            ("/sys/devices/system/cpu/cpufreq/boost", "0\n"),
            ("/sys/devices/system/cpu/intel_pstate/no_turbo", "0\n"),
            ("/sys/devices/system/cpu/smt/active", "1\n"),
            ("/sys/devices/system/cpu/isolated", "2-3\n"),
        ]);
        assert_eq!(
            root.governors(),
            ["powersave", "performance", "performance"]
        );
        // The generic switch wins over intel_pstate's.
        assert_eq!(root.turbo(), Some(Turbo::Off(BOOST_FILE)));
        assert_eq!(root.smt_active(), Some(true));
        assert_eq!(root.isolated_cpus().as_deref(), Some("2-3"));

        let (_d, root) = fake(&[("/sys/devices/system/cpu/intel_pstate/no_turbo", "0\n")]);
        assert_eq!(root.turbo(), Some(Turbo::On(NO_TURBO_FILE)));

        let (_d, empty) = fake(&[]);
        assert!(empty.governors().is_empty());
        assert_eq!(
            (empty.turbo(), empty.smt_active(), empty.isolated_cpus()),
            (None, None, None)
        );
        assert_eq!(empty.memory(), None);
        assert!(empty.process_times().is_empty());
    }

    #[test]
    fn memory_and_swap_come_from_meminfo() {
        let (_d, root) = fake(&[(
            "/proc/meminfo",
            "MemTotal:       16000000 kB\nMemFree: 1 kB\nMemAvailable:   12000000 kB\n\
             SwapCached: 0 kB\nSwapTotal:       2000000 kB\nSwapFree:        1500000 kB\n",
        )]);
        let m = root.memory().unwrap();
        assert_eq!((m.total_kib, m.available_kib), (16_000_000, 12_000_000));
        assert_eq!(m.swap_used_kib(), 500_000);
    }

    #[test]
    fn a_process_stat_is_read_past_a_name_with_spaces_and_parentheses() {
        let (_d, root) = fake(&[
            (
                "/proc/42/stat",
                "42 (my (odd) prog) R 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 5 0 0\n",
            ),
            ("/proc/self-not-a-pid/stat", "x"),
            ("/proc/43/stat", "garbage"),
        ]);
        assert_eq!(
            root.process_times(),
            [ProcessTime {
                pid: 42,
                ppid: 1,
                name: "my (odd) prog".into(),
                ticks: 300
            }]
        );
    }

    #[test]
    fn this_hosts_processes_are_read() {
        let root = Root::default();
        if std::path::Path::new("/proc/self/stat").exists() {
            let me = std::process::id();
            assert!(root.process_times().iter().any(|p| p.pid == me));
        }
    }
}
