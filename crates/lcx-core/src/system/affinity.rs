//! CPU affinity: the set of CPUs a cell's process may run on. An arm may
//! name one (`cpus = "0-3"`), or `[measurement] pin = true` gives every
//! arm the same one ([`pin_set`]): arms then share the same cores, caches
//! and clocks, and the runner's own threads stay off them. The set a
//! cell's process really got is read back from the kernel after it
//! started ([`of_process`]) and stored on its run: the record says what
//! ran, not what was asked.

use std::collections::BTreeSet;
use std::fmt;
use std::process::Command;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Root;

/// The most CPUs a set may name: `cpu_set_t` holds 1024.
pub const MAX_CPU: usize = 1023;

/// A set of CPU numbers, written as the kernel writes them (`0-3,6`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CpuSet(BTreeSet<usize>);

impl CpuSet {
    /// Reads a CPU list: numbers and ranges separated by commas (`0-3,6`),
    /// as `taskset -c` and `/sys` write them.
    pub fn parse(text: &str) -> Result<CpuSet, String> {
        let mut set = BTreeSet::new();
        let text = text.trim();
        if text.is_empty() {
            return Err("an empty CPU list (expected CPU numbers and ranges, as `0-3,6`)".into());
        }
        for part in text.split(',') {
            let part = part.trim();
            let number = |s: &str| {
                let n: usize = s.trim().parse().map_err(|_| {
                    format!("`{part}` is not a CPU number or range (expected as `0-3,6`)")
                })?;
                if n > MAX_CPU {
                    return Err(format!(
                        "CPU {n} is beyond the last one a set can name ({MAX_CPU})"
                    ));
                }
                Ok(n)
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (number(a)?, number(b)?);
                    if a > b {
                        return Err(format!("the range `{part}` runs backwards"));
                    }
                    set.extend(a..=b);
                }
                None => {
                    set.insert(number(part)?);
                }
            }
        }
        Ok(CpuSet(set))
    }

    pub fn from_cpus(cpus: impl IntoIterator<Item = usize>) -> CpuSet {
        CpuSet(cpus.into_iter().collect())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().copied()
    }

    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }

    /// The CPUs of this set that `other` lacks.
    pub fn without(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.difference(&other.0).copied().collect())
    }

    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&other.0).copied().collect())
    }

    /// Makes the child of `command` run on these CPUs only: set between
    /// fork and exec, so the program runs pinned from its first
    /// instruction, and a set the kernel refuses (no CPU of it online or
    /// allowed) fails the start with that error instead of running
    /// unpinned.
    pub fn apply_to(&self, command: &mut Command) {
        use std::os::unix::process::CommandExt;
        // Built before the fork: the child must not allocate.
        // SAFETY: cpu_set_t is plain bits; zeroed is the empty set.
        let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for cpu in self.iter() {
            if cpu <= MAX_CPU {
                // SAFETY: cpu <= MAX_CPU < CPU_SETSIZE, inside the set.
                unsafe { libc::CPU_SET(cpu, &mut mask) };
            }
        }
        // SAFETY: sched_setaffinity is async-signal-safe and only changes
        // the child's own scheduling between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let size = std::mem::size_of::<libc::cpu_set_t>();
                if libc::sched_setaffinity(0, size, &mask) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

impl fmt::Display for CpuSet {
    /// The kernel's list form: runs of consecutive CPUs as ranges.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut cpus = self.iter().peekable();
        while let Some(start) = cpus.next() {
            let mut end = start;
            while cpus.peek() == Some(&(end + 1)) {
                end += 1;
                cpus.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if end == start {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CpuSet, D::Error> {
        let text = String::deserialize(d)?;
        CpuSet::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The CPUs this process may run on (`sched_getaffinity`): what a cell may
/// be pinned to. `None` where the kernel does not say.
pub fn allowed() -> Option<CpuSet> {
    // SAFETY: the kernel fills the zeroed set we own.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: pid 0 is this thread; mask is valid for `size` bytes.
    if unsafe { libc::sched_getaffinity(0, size, &mut mask) } != 0 {
        return None;
    }
    // SAFETY: CPU_ISSET reads bits of the set we own.
    let cpus = (0..=MAX_CPU).filter(|&c| unsafe { libc::CPU_ISSET(c, &mask) });
    Some(CpuSet::from_cpus(cpus))
}

/// The CPUs a process may run on, as the kernel reports it
/// (`Cpus_allowed_list` in `/proc/PID/status`; readable until it is
/// reaped).
pub fn of_process(root: &Root, pid: u32) -> Option<CpuSet> {
    let status = std::fs::read_to_string(root.path().join(format!("proc/{pid}/status"))).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|list| CpuSet::parse(list).ok())
}

/// The set `[measurement] pin = true` gives every arm: the kernel's
/// isolated CPUs (`isolcpus=`) that this process may use, when there are
/// any, as pyperf does; otherwise every allowed CPU but the lowest, which
/// stays with the runner, its threads and the rest of the system. A host
/// with one allowed CPU has nothing to pin to.
pub fn pin_set(allowed: &CpuSet, isolated: Option<&CpuSet>) -> Result<CpuSet, String> {
    if let Some(isolated) = isolated {
        let usable = isolated.intersection(allowed);
        if !usable.is_empty() {
            return Ok(usable);
        }
    }
    if allowed.len() < 2 {
        return Err(format!(
            "this process may use only CPU {allowed}: nothing is left to pin cells to once the \
             runner has one"
        ));
    }
    Ok(CpuSet::from_cpus(allowed.iter().skip(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_list_reads_and_writes_as_the_kernel_writes_it() {
        let set = CpuSet::parse(" 0-3, 6,8-9 ,7").unwrap();
        assert_eq!(set.iter().collect::<Vec<_>>(), [0, 1, 2, 3, 6, 7, 8, 9]);
        assert_eq!(set.to_string(), "0-3,6-9");
        assert_eq!(CpuSet::parse("5").unwrap().to_string(), "5");
        assert_eq!(CpuSet::parse("1,3,5").unwrap().to_string(), "1,3,5");
        for bad in ["", "a", "3-1", "1-", "0,,1", "2048", "-1"] {
            assert!(CpuSet::parse(bad).is_err(), "`{bad}` was accepted");
        }
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(json, "\"0-3,6-9\"");
        assert_eq!(serde_json::from_str::<CpuSet>(&json).unwrap(), set);
    }

    #[test]
    fn pinning_takes_the_isolated_cpus_else_leaves_the_lowest_to_the_runner() {
        let all = CpuSet::parse("0-7").unwrap();
        let isolated = CpuSet::parse("4-7,12").unwrap();
        assert_eq!(pin_set(&all, Some(&isolated)).unwrap().to_string(), "4-7");
        assert_eq!(pin_set(&all, None).unwrap().to_string(), "1-7");
        // Isolated CPUs this process may not use are no help.
        let elsewhere = CpuSet::parse("12-13").unwrap();
        assert_eq!(pin_set(&all, Some(&elsewhere)).unwrap().to_string(), "1-7");
        let taskset = CpuSet::parse("2,5").unwrap();
        assert_eq!(pin_set(&taskset, None).unwrap().to_string(), "5");
        let one = CpuSet::parse("3").unwrap();
        assert!(pin_set(&one, None).unwrap_err().contains("only CPU 3"));
    }

    #[test]
    fn a_child_runs_on_the_set_it_was_given_and_the_kernel_says_so() {
        let allowed = allowed().expect("sched_getaffinity");
        let last = CpuSet::from_cpus(allowed.iter().last());
        let mut command = Command::new("sleep");
        command.arg("5");
        last.apply_to(&mut command);
        let mut child = command.spawn().unwrap();
        let seen = of_process(&Root::default(), child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(seen, Some(last));
    }

    #[test]
    fn a_set_the_kernel_refuses_fails_the_start() {
        let allowed = allowed().expect("sched_getaffinity");
        let beyond = CpuSet::from_cpus([MAX_CPU]);
        assert!(!beyond.is_subset(&allowed), "a host with 1024 CPUs");
        let mut command = Command::new("true");
        beyond.apply_to(&mut command);
        let error = command.spawn().unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EINVAL), "{error}");
    }
}
