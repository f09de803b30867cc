//! The host around a cell: what else ran on it while the cell did. Sampled
//! at the cell's start and end (CPU time of the whole host, load, swap, GPU
//! processes) and every half second in between (clock speeds), so the
//! report can tell a quiet measurement from a contended one.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::store::{Contention, ForeignProcess};
use crate::system::proc::{self, CpuTimes, Root};
use crate::system::settings::ProcessTime;
use crate::system::snapshot::{busiest, tree_of};

/// How often the clocks are sampled while a cell runs.
const CLOCK_EVERY: Duration = Duration::from_millis(500);

/// A watch started just before a cell and finished once it ended.
pub(crate) struct HostWatch {
    root: Root,
    started: Instant,
    cpu: Option<CpuTimes>,
    self_cpu: f64,
    load: Option<f64>,
    swapped: Option<u64>,
    gpu_others: Option<i64>,
    /// Every process's CPU time at the start, to name the busiest others.
    processes: Vec<ProcessTime>,
    clocks: Option<(mpsc::Sender<()>, JoinHandle<Sampled>)>,
}

/// What the sampler thread saw: clock speeds (MHz) and the seconds the
/// runner could not run.
type Sampled = (Vec<f64>, f64);

/// A wake of the sampler later than this after the one before means the
/// runner did not run meanwhile (it sleeps [`CLOCK_EVERY`] between wakes).
const STALL_AFTER: Duration = Duration::from_millis(1500);

/// The time the runner lost in one sampler period: the part of `gap`
/// beyond the period, when the gap is long enough to be no scheduling
/// jitter.
fn stall_in(gap: Duration) -> f64 {
    if gap > STALL_AFTER {
        (gap - CLOCK_EVERY).as_secs_f64()
    } else {
        0.0
    }
}

impl HostWatch {
    pub(crate) fn start(root: Root) -> HostWatch {
        let (tx, rx) = mpsc::channel::<()>();
        let sampler = root.clone();
        let clocks = std::thread::Builder::new()
            .name("lcx-clocks".into())
            .spawn(move || {
                let mut seen = sampler.cpu_mhz();
                // The runner's own stalls: a stopped process (SIGSTOP, a
                // frozen cgroup) or a paused machine wakes this thread late.
                let mut stalled = 0.0;
                let mut last = Instant::now();
                // Until the watch is finished (its sender dropped).
                loop {
                    let waited = rx.recv_timeout(CLOCK_EVERY);
                    stalled += stall_in(last.elapsed());
                    if !matches!(waited, Err(RecvTimeoutError::Timeout)) {
                        break;
                    }
                    seen.extend(sampler.cpu_mhz());
                    // From after the sampling: slow reads are not a stall.
                    last = Instant::now();
                }
                seen.extend(sampler.cpu_mhz());
                (seen, stalled)
            })
            .ok()
            .map(|handle| (tx, handle));
        HostWatch {
            gpu_others: crate::system::gpu::compute_processes(),
            processes: root.process_times(),
            cpu: root.cpu_times(),
            self_cpu: proc::self_cpu_seconds(),
            load: root.load_1m(),
            swapped: root.swapped_pages(),
            started: Instant::now(),
            clocks,
            root,
        }
    }

    /// The figures, given the CPU seconds the cell's own process tree used
    /// (`None` when the executor cannot tell: the foreign share is then
    /// unknown too).
    pub(crate) fn finish(self, cell_cpu: Option<f64>) -> Contention {
        let span = self.started.elapsed().as_secs_f64();
        let cpu = self.root.cpu_times();
        let self_cpu = proc::self_cpu_seconds() - self.self_cpu;
        let (clocks, stalled) = match self.clocks.and_then(|(tx, handle)| {
            drop(tx);
            handle.join().ok()
        }) {
            Some((clocks, stalled)) => (clocks, Some(stalled)),
            None => (Vec::new(), None),
        };
        let tick = proc::ticks_per_second();
        let delta = match (self.cpu, cpu) {
            (Some(before), Some(after)) => Some(before.until(&after)),
            _ => None,
        };
        // The host's busy time, less the cell's and the runner's own (its
        // threads reading the cell's output count as the measurement's).
        let foreign = match (delta, cell_cpu) {
            (Some(d), Some(cell)) => Some((d.busy as f64 / tick - cell - self_cpu).max(0.0)),
            _ => None,
        };
        // Who else used the CPUs: the runner and the cell's processes
        // still alive (those under the runner) left out.
        let me = std::process::id();
        let after = self.root.process_times();
        let foreign_processes = (!after.is_empty() && span > 0.0).then(|| {
            let ours = tree_of(me, &after);
            busiest(&self.processes, &after, tick * span, |p| {
                ours.contains(&p.pid)
            })
            .into_iter()
            .map(|(_, name, cores)| ForeignProcess { name, cores })
            .collect()
        });
        let min = clocks.iter().copied().reduce(f64::min);
        let max = clocks.iter().copied().reduce(f64::max);
        let end_gpu = crate::system::gpu::compute_processes();
        Contention {
            cpu_seconds: cell_cpu,
            foreign_cpu_seconds: foreign,
            host_seconds: Some(span),
            host_cpus: self.root.online_cpus().map(|n| n as i64),
            steal_seconds: delta.map(|d| d.steal as f64 / tick),
            load_start: self.load,
            load_end: self.root.load_1m(),
            cpu_mhz_min: min,
            cpu_mhz_max: max,
            swapped_pages: match (self.swapped, self.root.swapped_pages()) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a) as i64),
                _ => None,
            },
            gpu_other_processes: match (self.gpu_others, end_gpu) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
            runner_stall_seconds: stalled,
            foreign_processes,
        }
    }
}

/// Waits, up to `limit`, until the rest of the host used at most
/// `threshold` cores over the last second. `Err(cores)`: still busy when
/// the time ran out (or a stop came); the cell then runs anyway and its own
/// figures say how contended it was. A host without `/proc` is taken as
/// quiet: there is nothing to wait on.
pub(crate) fn wait_for_quiet(
    root: &Root,
    threshold: f64,
    limit: Duration,
    stopped: &dyn Fn() -> bool,
) -> Result<(), f64> {
    let deadline = Instant::now() + limit;
    loop {
        let Some((foreign, _)) = root.foreign_cores(Duration::from_secs(1)) else {
            return Ok(());
        };
        if foreign <= threshold {
            return Ok(());
        }
        if Instant::now() >= deadline || stopped() {
            return Err(foreign);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake host whose /proc/stat the test moves on, as a busy host's would.
    fn host(busy: u64) -> String {
        format!("cpu  {busy} 0 0 1000 0 0 0 30 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0 0 0\n")
    }

    #[test]
    fn a_late_wake_is_the_runner_stalled() {
        assert_eq!(stall_in(Duration::from_millis(500)), 0.0);
        assert_eq!(stall_in(Duration::from_millis(1400)), 0.0, "jitter");
        assert!((stall_in(Duration::from_secs(20)) - 19.5).abs() < 1e-9);
    }

    #[test]
    fn foreign_cpu_is_the_hosts_busy_time_less_the_cells() {
        let dir = tempfile::tempdir().unwrap();
        let write = |file: &str, text: &str| {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("proc/stat", &host(1000));
        write("proc/loadavg", "0.50 0.4 0.3 1/100 7\n");
        write("proc/vmstat", "pswpin 10\npswpout 0\n");
        write("proc/cpuinfo", "cpu MHz\t: 2000.0\ncpu MHz\t: 2100.0\n");
        // Another program, this runner, and a process of the cell under it.
        let me = std::process::id();
        let stat = |pid: u32, name: &str, ppid: u32, ticks: u64| {
            write(
                &format!("proc/{pid}/stat"),
                &format!("{pid} ({name}) R {ppid} 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 5\n"),
            );
        };
        let child = me.wrapping_add(1);
        stat(77, "cargo", 1, 100);
        stat(me, "lcx", 1, 0);
        stat(child, "bench", me, 0);
        let watch = HostWatch::start(Root::new(dir.path()));
        let tick = proc::ticks_per_second();
        stat(77, "cargo", 1, 100 + tick as u64);
        stat(me, "lcx", 1, 5 * tick as u64);
        stat(child, "bench", me, 9 * tick as u64);
        // 3 s of busy time went by on the host; the cell used 1 s of it.
        write("proc/stat", &host(1000 + (3.0 * tick) as u64));
        write("proc/loadavg", "1.50 0.4 0.3 1/100 7\n");
        write("proc/vmstat", "pswpin 12\npswpout 3\n");
        write("proc/cpuinfo", "cpu MHz\t: 1500.0\ncpu MHz\t: 2100.0\n");
        let c = watch.finish(Some(1.0));
        let foreign = c.foreign_cpu_seconds.unwrap();
        // Less what this test process itself used meanwhile (a little).
        assert!(foreign > 1.5 && foreign <= 2.0, "{foreign}");
        assert_eq!(c.cpu_seconds, Some(1.0));
        assert_eq!((c.load_start, c.load_end), (Some(0.5), Some(1.5)));
        assert_eq!(c.swapped_pages, Some(5));
        assert_eq!(c.host_cpus, Some(2));
        assert_eq!((c.cpu_mhz_min, c.cpu_mhz_max), (Some(1500.0), Some(2100.0)));
        assert_eq!(c.steal_seconds, Some(0.0));
        assert!(c.foreign_cores().is_some());
        // The busiest other program is named; the runner and its cell are
        // not, however much they used.
        let names: Vec<&str> = c
            .foreign_processes
            .as_deref()
            .unwrap()
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["cargo"]);
    }

    #[test]
    fn a_host_without_proc_is_unknown_not_zero() {
        let dir = tempfile::tempdir().unwrap();
        let c = HostWatch::start(Root::new(dir.path())).finish(Some(1.0));
        assert_eq!(
            (
                c.foreign_cpu_seconds,
                c.load_start,
                c.swapped_pages,
                c.host_cpus
            ),
            (None, None, None, None)
        );
        assert_eq!((c.cpu_mhz_min, c.steal_seconds), (None, None));
        // Without the cell's own CPU time the foreign share is unknown too.
        let c = HostWatch::start(Root::default()).finish(None);
        assert_eq!(c.foreign_cpu_seconds, None);
    }

    #[test]
    fn a_quiet_host_is_waited_for_and_a_busy_one_given_up_on() {
        // A host whose CPU time does not move is quiet at once; one
        // without /proc has nothing to wait on.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/stat"), host(1000)).unwrap();
        let never = || false;
        let limit = Duration::from_secs(30);
        assert_eq!(
            wait_for_quiet(&Root::new(dir.path()), 0.1, limit, &never),
            Ok(())
        );
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            wait_for_quiet(&Root::new(empty.path()), 0.1, limit, &never),
            Ok(())
        );

        // Two processes spinning on this host keep it busy past the limit.
        if Root::default().cpu_times().is_none() {
            return;
        }
        let spin = || {
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap()
        };
        let mut burners = [spin(), spin()];
        let busy = wait_for_quiet(&Root::default(), 0.5, Duration::from_millis(1500), &never);
        for b in &mut burners {
            b.kill().unwrap();
            b.wait().unwrap();
        }
        assert!(matches!(busy, Err(cores) if cores > 0.5), "{busy:?}");
    }
}
