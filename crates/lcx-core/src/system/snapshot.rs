//! Everything `lcx system show` prints, read at once: the settings, and
//! the CPU that other programs use, sampled over a short wait.

use std::time::Duration;

use super::gpu::{self, Gpu};
use super::proc::ticks_per_second;
use super::settings::{Memory, ProcessTime, Turbo};
use super::Root;

/// What the machine is set to and doing now.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub governors: Vec<String>,
    pub turbo: Option<Turbo>,
    pub smt: Option<bool>,
    pub isolated: Option<String>,
    pub load_1m: Option<f64>,
    pub cpus: Option<usize>,
    pub foreign: Option<Foreign>,
    pub memory: Option<Memory>,
    /// `Ok(None)`: no `nvidia-smi`; `Err`: it is there and failed.
    pub gpus: Result<Option<Vec<Gpu>>, String>,
}

/// CPU used by everything but this process over the sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Foreign {
    /// Busy CPU time over wall time: 1.0 is one core kept busy.
    pub cores: f64,
    pub seconds: f64,
    /// The processes that used the most, most first (at most three, each
    /// above 0.05 core): `(pid, name, cores)`.
    pub top: Vec<(u32, String, f64)>,
}

impl Snapshot {
    /// Reads everything under `root`, sampling the host's CPU time over
    /// `sample` (skipped where `/proc/stat` cannot be read). `gpus` asks
    /// `nvidia-smi`; without it the GPU is unknown.
    pub fn take(root: &Root, sample: Duration, gpus: bool) -> Snapshot {
        Snapshot {
            governors: root.governors(),
            turbo: root.turbo(),
            smt: root.smt_active(),
            isolated: root.isolated_cpus(),
            load_1m: root.load_1m(),
            cpus: root.online_cpus(),
            foreign: foreign(root, sample),
            memory: root.memory(),
            gpus: if gpus { gpu::gpus() } else { Ok(None) },
        }
    }
}

/// Host busy CPU over `sample`, in cores, less this process's own.
fn foreign(root: &Root, sample: Duration) -> Option<Foreign> {
    let processes = root.process_times();
    let (cores, seconds) = root.foreign_cores(sample)?;
    let tps = ticks_per_second();
    Some(Foreign {
        cores,
        seconds,
        top: top(&processes, &root.process_times(), tps * seconds),
    })
}

/// The processes that gained the most CPU time between two readings,
/// this one left out; `per_core` is ticks per core over the sample.
fn top(before: &[ProcessTime], after: &[ProcessTime], per_core: f64) -> Vec<(u32, String, f64)> {
    let me = std::process::id();
    busiest(before, after, per_core, |p| p.pid == me)
}

/// The (at most three) processes that gained the most CPU time between two
/// readings, in cores over `per_core` ticks per core, above 0.05 of a core;
/// those `left_out` says are not counted.
pub fn busiest(
    before: &[ProcessTime],
    after: &[ProcessTime],
    per_core: f64,
    left_out: impl Fn(&ProcessTime) -> bool,
) -> Vec<(u32, String, f64)> {
    // One map of the first reading, not a search of it per process.
    let was: std::collections::HashMap<u32, u64> =
        before.iter().map(|b| (b.pid, b.ticks)).collect();
    let mut used: Vec<(u32, String, f64)> = after
        .iter()
        .filter(|p| !left_out(p))
        .filter_map(|p| {
            // By pid alone: a kernel worker's name says what it does now.
            // A process born during the sample: all its time is in it.
            let gained = p
                .ticks
                .saturating_sub(was.get(&p.pid).copied().unwrap_or(0));
            let cores = gained as f64 / per_core;
            (cores > 0.05).then(|| (p.pid, p.name.clone(), cores))
        })
        .collect();
    used.sort_by(|a, b| b.2.total_cmp(&a.2));
    used.truncate(3);
    used
}

/// `root` and every process that runs under it (its child, a child's
/// child…), by the parents `processes` name: built once from a parent map,
/// so a reading of thousands of processes is walked once, and a pid loop
/// (pids reused between readings) ends.
pub fn tree_of(root: u32, processes: &[ProcessTime]) -> std::collections::HashSet<u32> {
    let mut children: std::collections::HashMap<u32, Vec<u32>> = std::collections::HashMap::new();
    for p in processes {
        children.entry(p.ppid).or_default().push(p.pid);
    }
    let mut tree = std::collections::HashSet::from([root]);
    let mut next = vec![root];
    while let Some(pid) = next.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            if tree.insert(child) {
                next.push(child);
            }
        }
    }
    tree
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::proc::tests::fake;

    fn p(pid: u32, name: &str, ticks: u64) -> ProcessTime {
        ProcessTime {
            pid,
            ppid: 1,
            name: name.into(),
            ticks,
        }
    }

    #[test]
    fn the_top_users_are_those_that_gained_most_and_never_this_process() {
        let me = std::process::id();
        let before = [
            p(1, "idle", 10),
            p(2, "kworker/0:1-a", 100),
            p(me, "lcx", 0),
        ];
        let after = [
            p(1, "idle", 11),
            p(2, "burner", 200),
            p(3, "new", 30),
            p(me, "lcx", 500),
        ];
        // 100 ticks per core over the sample.
        let top = top(&before, &after, 100.0);
        assert_eq!(
            top,
            [(2, "burner".to_string(), 1.0), (3, "new".to_string(), 0.3)]
        );
    }

    #[test]
    fn a_process_tree_is_told_by_its_parents() {
        let tree = [
            ProcessTime {
                pid: 10,
                ppid: 1,
                name: "lcx".into(),
                ticks: 0,
            },
            ProcessTime {
                pid: 11,
                ppid: 10,
                name: "sh".into(),
                ticks: 0,
            },
            ProcessTime {
                pid: 12,
                ppid: 11,
                name: "bench".into(),
                ticks: 0,
            },
            ProcessTime {
                pid: 20,
                ppid: 1,
                name: "cargo".into(),
                ticks: 0,
            },
            // A loop (a reused pid): no hang, and not under 10.
            ProcessTime {
                pid: 30,
                ppid: 31,
                name: "a".into(),
                ticks: 0,
            },
            ProcessTime {
                pid: 31,
                ppid: 30,
                name: "b".into(),
                ticks: 0,
            },
        ];
        let under = tree_of(10, &tree);
        assert!(under.contains(&10) && under.contains(&11) && under.contains(&12));
        assert!(!under.contains(&20) && !under.contains(&30));
    }

    #[test]
    fn a_static_tree_is_quiet_and_a_tree_without_proc_is_unknown() {
        let (_d, root) = fake(&[
            (
                "/proc/stat",
                "cpu  100 0 50 1000 0 0 0 0 0 0\ncpu0 100 0 50 1000 0 0 0 0 0 0\n",
            ),
            ("/proc/loadavg", "0.20 0.1 0.1 1/100 5\n"),
        ]);
        let s = Snapshot::take(&root, Duration::from_millis(10), false);
        let f = s.foreign.unwrap();
        assert_eq!(f.cores, 0.0);
        assert!(f.top.is_empty());
        assert_eq!((s.load_1m, s.cpus), (Some(0.2), Some(1)));
        assert_eq!(s.gpus, Ok(None));

        let (_d, empty) = fake(&[]);
        let s = Snapshot::take(&empty, Duration::from_secs(3600), false);
        assert_eq!(s.foreign, None, "no wait without /proc/stat");
        assert_eq!((s.load_1m, s.memory, s.turbo), (None, None, None));
    }
}
