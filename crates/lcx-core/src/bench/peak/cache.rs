//! The best ceiling seen per host and boot. A probe costs half a second
//! and one try in ten on a shared host is disturbed, so the ceiling is
//! probed once per boot (and CPU governor, CPU model, CPUs lcx may use)
//! and the best clean probe is kept: in a small file under the user's
//! cache directory, which every database on the host shares, and in each
//! database's `host_peaks` table (the store's), which travels with
//! the results. A reboot, a governor change or a `taskset` makes a new key
//! and so a new probe.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Peak;

/// What a ceiling holds for: the same machine, booted once, clocked by
/// the same governor, with the same CPUs open to lcx.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostKey {
    pub hostname: String,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// The CPUs' cpufreq governors (`performance`, `powersave,performance`),
    /// `none` without cpufreq.
    pub governor: String,
    pub cpu_model: String,
    /// The CPUs this process may use (`0-15`).
    pub cpus: String,
}

impl HostKey {
    /// This host now; `None` where it cannot be told apart from another
    /// boot (no hostname or boot id: then every run probes).
    pub fn here() -> Option<HostKey> {
        let root = crate::system::Root::default();
        let mut governors = root.governors();
        governors.sort_unstable();
        governors.dedup();
        Some(HostKey {
            hostname: root.hostname()?,
            boot_id: root.boot_id()?,
            governor: if governors.is_empty() {
                "none".into()
            } else {
                governors.join(",")
            },
            cpu_model: root.cpu_model().unwrap_or_default(),
            cpus: crate::system::affinity::allowed()
                .map(|c| c.to_string())
                .unwrap_or_default(),
        })
    }
}

/// The best clean probe of a host key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    pub key: HostKey,
    pub isa: String,
    pub threads: usize,
    /// FP32 GFLOP/s on every core, the best clean probe's.
    pub gflops: f64,
    /// FP32 GFLOP/s on one core, the best seen.
    pub gflops_core: f64,
    /// Triad GB/s, the best seen.
    pub stream_gbytes_per_second: f64,
    /// Clean tries of the best probe, and how far apart they lay.
    pub tries: usize,
    pub spread: f64,
    /// When the best all-core figure was probed (UTC, RFC 3339).
    pub probed_at: String,
    /// When a probe last confirmed or raised it.
    pub checked_at: String,
    /// Clean probes folded in.
    pub probes: u32,
    /// No probe of this key has been clean yet: the figures are a floor
    /// (the best disturbed try), kept in the cache file only, so that a
    /// busy host is not probed again by every run of the boot. A clean
    /// probe replaces it; a database's `host_peaks` never holds one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disturbed: bool,
}

impl Ceiling {
    /// A probe's figures as a ceiling of its own (a floor when no try of
    /// it was clean).
    pub fn of(key: HostKey, peak: &Peak, now: &str) -> Ceiling {
        Ceiling {
            key,
            isa: peak.isa.to_string(),
            threads: peak.threads,
            gflops: peak.gflops,
            gflops_core: peak.gflops_core,
            stream_gbytes_per_second: peak.stream_gbytes_per_second,
            tries: peak.tries,
            spread: peak.spread,
            probed_at: now.to_string(),
            checked_at: now.to_string(),
            probes: u32::from(!peak.disturbed),
            disturbed: peak.disturbed,
        }
    }

    /// Folds a probe in: each figure keeps the best seen, and the all-core
    /// figure its probe's tries, spread and date. A disturbed probe (no
    /// clean try) changes a clean ceiling in nothing and raises a floor;
    /// a clean probe replaces a floor.
    pub fn fold(self, peak: &Peak, now: &str) -> Ceiling {
        match (self.disturbed, peak.disturbed) {
            (false, true) => return self,
            (true, true) if peak.gflops <= self.gflops => return self,
            (true, _) => return Ceiling::of(self.key.clone(), peak, now),
            (false, false) => {}
        }
        let mut out = if peak.gflops > self.gflops {
            Ceiling::of(self.key.clone(), peak, now)
        } else {
            self.clone()
        };
        out.gflops_core = self.gflops_core.max(peak.gflops_core);
        out.stream_gbytes_per_second = self
            .stream_gbytes_per_second
            .max(peak.stream_gbytes_per_second);
        out.checked_at = now.to_string();
        out.probes = self.probes + 1;
        out
    }

    /// "181 GFLOP/s, best of 5, spread 2 %, probed 2026-12-03".
    pub fn describe(&self) -> String {
        if self.tries == 0 {
            return format!(
                "no clean try, probed {}",
                self.probed_at.get(..10).unwrap_or(&self.probed_at)
            );
        }
        format!(
            "best of {}, spread {:.0} %, probed {}",
            self.tries,
            100.0 * self.spread,
            self.probed_at.get(..10).unwrap_or(&self.probed_at)
        )
    }
}

/// The user's peak cache: `LCX_PEAK_CACHE`, else `$XDG_CACHE_HOME/lcx/
/// peak.json`, else `~/.cache/lcx/peak.json`.
pub fn file_path() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(p) = env("LCX_PEAK_CACHE") {
        return Some(PathBuf::from(p));
    }
    let base = env("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("lcx").join("peak.json"))
}

/// The entry of `key` in the cache file, else its floor (a probe with no
/// clean try, kept beside the file); a missing or unreadable file is an
/// empty cache (it is only a cache).
pub fn load(path: &Path, key: &HostKey) -> Option<Ceiling> {
    let find = |p: &Path| entries(p).into_iter().find(|c| &c.key == key);
    find(path).or_else(|| {
        find(&floors_path(path)).map(|c| Ceiling {
            disturbed: true,
            ..c
        })
    })
}

/// Where floors are kept: a file of their own (`peak.floors.json`), so that
/// an older lcx, which reads the cache file's entries as clean ceilings,
/// never sees one.
fn floors_path(path: &Path) -> PathBuf {
    path.with_extension("floors.json")
}

fn entries(path: &Path) -> Vec<Ceiling> {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Writes `ceiling` into the cache file, or a floor into the floors' file
/// (replacing its host's entry there, and the entries of earlier boots of
/// its host: a home directory shared by a cluster's nodes keeps one entry
/// per node). A clean ceiling also removes its host's floor. Each file is
/// written whole to a temporary file and renamed, so a reader never sees
/// half a file.
pub fn save(path: &Path, ceiling: &Ceiling) -> std::io::Result<()> {
    let floors = floors_path(path);
    let host = &ceiling.key.hostname;
    if ceiling.disturbed {
        return replace_entry(&floors, host, Some(ceiling));
    }
    replace_entry(path, host, Some(ceiling))?;
    if entries(&floors).iter().any(|c| &c.key.hostname == host) {
        replace_entry(&floors, host, None)?;
    }
    Ok(())
}

/// `path`'s entries with `host`'s replaced by `entry` (or removed).
fn replace_entry(path: &Path, host: &str, entry: Option<&Ceiling>) -> std::io::Result<()> {
    let mut all = entries(path);
    all.retain(|c| c.key.hostname != host);
    all.extend(entry.cloned());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_vec_pretty(&all).map_err(std::io::Error::other)?;
    crate::files::replace("LCX_PEAK_CACHE", path, &text, &[]).map_err(std::io::Error::other)
}

/// Holds the cache's probe lock (`peak.json.lock` beside the file) until
/// dropped: two runs started together on one host would disturb each
/// other's probes, so the second waits for the first and then reads what
/// it cached. `None` where the lock cannot be taken (the probe goes on).
pub fn probe_lock(path: &Path) -> Option<std::fs::File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).ok()?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path.with_extension("json.lock"))
        .ok()?;
    // Released when the file is closed.
    crate::system::lock::flock(&file, libc::LOCK_EX)
        .ok()
        .map(|()| file)
}

/// Now, as the cache writes dates (UTC, RFC 3339, seconds).
pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Where an experiment's ceiling came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeakSource {
    /// The host's best clean probe of this boot: no probe ran.
    Cached,
    /// Probed now (and folded into the host's best, which is what counts).
    Probed,
    /// Probed now, no try had all its cores, and nothing better is known:
    /// a floor, not a ceiling.
    Disturbed,
    /// A phase ran faster than the recorded ceiling and the runner probed
    /// again.
    Reprobed,
}

impl PeakSource {
    pub fn as_str(self) -> &'static str {
        match self {
            PeakSource::Cached => "cached",
            PeakSource::Probed => "probed",
            PeakSource::Disturbed => "disturbed",
            PeakSource::Reprobed => "reprobed",
        }
    }
}

/// The best ceiling known for this host, and the probe that ran for it.
#[derive(Debug, Clone)]
pub struct KnownCeiling {
    pub ceiling: Ceiling,
    pub source: PeakSource,
    pub probe: Option<Peak>,
}

impl KnownCeiling {
    /// `ceiling` found as `clean` says (cached, probed), unless it is a
    /// floor: then it says so, whichever way it was found.
    pub(crate) fn new(ceiling: Ceiling, clean: PeakSource, probe: Option<Peak>) -> KnownCeiling {
        let source = if ceiling.disturbed {
            PeakSource::Disturbed
        } else {
            clean
        };
        KnownCeiling {
            ceiling,
            source,
            probe,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A figure read back from the cache file is the f64 that was written:
    /// serde_json's default parser read this one an ulp off, so a cached
    /// ceiling differed from the probed one in the last digit.
    #[test]
    fn figures_round_trip_through_json_exactly() {
        for x in [227.188_805_169_974_78_f64, 0.1, 1e-300, 123_456.789_012_345] {
            let back: f64 = serde_json::from_str(&serde_json::to_string(&x).unwrap()).unwrap();
            assert_eq!(back.to_bits(), x.to_bits(), "{x}");
        }
    }

    fn key(host: &str, boot: &str) -> HostKey {
        HostKey {
            hostname: host.into(),
            boot_id: boot.into(),
            governor: "none".into(),
            cpu_model: "cpu".into(),
            cpus: "0-1".into(),
        }
    }

    fn peak(gflops: f64, core: f64, disturbed: bool) -> Peak {
        Peak {
            isa: "avx2-fma",
            threads: 2,
            gflops_core: core,
            gflops,
            stream_gbytes_per_second: 28.0,
            tries: 5,
            discarded: 0,
            spread: 0.02,
            disturbed,
            seconds: 0.5,
        }
    }

    #[test]
    fn a_ceiling_keeps_the_best_clean_probe_and_its_date() {
        let c = Ceiling::of(
            key("h", "b"),
            &peak(178.0, 89.0, false),
            "2026-12-01T10:00:00Z",
        );
        let c = c.fold(&peak(170.0, 90.0, false), "2026-12-02T10:00:00Z");
        assert_eq!((c.gflops, c.gflops_core, c.probes), (178.0, 90.0, 2));
        assert_eq!(c.probed_at, "2026-12-01T10:00:00Z");
        assert_eq!(c.checked_at, "2026-12-02T10:00:00Z");
        let c = c.fold(&peak(181.0, 88.0, false), "2026-12-03T10:00:00Z");
        assert_eq!((c.gflops, c.gflops_core, c.probes), (181.0, 90.0, 3));
        assert_eq!(c.probed_at, "2026-12-03T10:00:00Z");
        // A disturbed probe is no evidence of anything.
        let same = c
            .clone()
            .fold(&peak(500.0, 300.0, true), "2026-12-04T10:00:00Z");
        assert_eq!(same, c);
        assert_eq!(c.describe(), "best of 5, spread 2 %, probed 2026-12-03");
    }

    #[test]
    fn a_floor_is_raised_by_busy_probes_and_replaced_by_a_clean_one() {
        let floor = Ceiling::of(
            key("h", "b"),
            &peak(90.0, 60.0, true),
            "2026-12-01T10:00:00Z",
        );
        assert!(floor.disturbed);
        assert_eq!(floor.probes, 0);
        let lower = floor
            .clone()
            .fold(&peak(80.0, 70.0, true), "2026-12-01T11:00:00Z");
        assert_eq!(lower, floor);
        let higher = floor.fold(&peak(120.0, 70.0, true), "2026-12-01T12:00:00Z");
        assert_eq!((higher.gflops, higher.disturbed), (120.0, true));
        // A clean probe reading less than the floor still replaces it: a
        // floor is no ceiling.
        let clean = higher.fold(&peak(110.0, 60.0, false), "2026-12-01T13:00:00Z");
        assert_eq!(
            (clean.gflops, clean.disturbed, clean.probes),
            (110.0, false, 1)
        );
        // The cache file keeps the flag; a clean entry writes none.
        let text = serde_json::to_string(&clean).unwrap();
        assert!(!text.contains("disturbed"), "{text}");
        let back: Ceiling = serde_json::from_str(
            &serde_json::to_string(&Ceiling::of(key("h", "b"), &peak(9.0, 9.0, true), "t"))
                .unwrap(),
        )
        .unwrap();
        assert!(back.disturbed);
    }

    #[test]
    fn floors_live_beside_the_cache_file_until_a_clean_probe() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peak.json");
        let k = key("h", "b");
        let floor = Ceiling::of(k.clone(), &peak(90.0, 60.0, true), "t1");
        save(&path, &floor).unwrap();
        // The cache file an older lcx reads holds no floor.
        assert!(entries(&path).is_empty());
        assert_eq!(load(&path, &k), Some(floor));
        let clean = Ceiling::of(k.clone(), &peak(180.0, 90.0, false), "t2");
        save(&path, &clean).unwrap();
        assert_eq!(load(&path, &k), Some(clean));
        assert!(entries(&floors_path(&path)).is_empty());
    }

    #[test]
    fn a_second_prober_waits_for_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peak.json");
        let first = probe_lock(&path).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                let _second = probe_lock(&path).unwrap();
                tx.send(()).unwrap();
            })
        };
        let waited = rx.recv_timeout(std::time::Duration::from_millis(200));
        assert!(
            waited.is_err(),
            "the second lock was granted while the first was held"
        );
        drop(first);
        rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        waiter.join().unwrap();
    }

    #[test]
    fn the_cache_file_keeps_one_entry_per_host_and_reads_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/peak.json");
        assert_eq!(load(&path, &key("a", "1")), None);
        let a1 = Ceiling::of(key("a", "1"), &peak(178.0, 89.0, false), "t");
        let b1 = Ceiling::of(key("b", "1"), &peak(100.0, 50.0, false), "t");
        save(&path, &a1).unwrap();
        save(&path, &b1).unwrap();
        assert_eq!(load(&path, &key("a", "1")), Some(a1));
        // A reboot of `a` replaces its entry; `b`'s stays.
        let a2 = Ceiling::of(key("a", "2"), &peak(150.0, 80.0, false), "t");
        save(&path, &a2).unwrap();
        assert_eq!(load(&path, &key("a", "1")), None);
        assert_eq!(load(&path, &key("a", "2")), Some(a2));
        assert_eq!(load(&path, &key("b", "1")), Some(b1));
        // Another governor is another key.
        let mut other = key("b", "1");
        other.governor = "powersave".into();
        assert_eq!(load(&path, &other), None);
        // A damaged file is an empty cache, and the next save mends it.
        std::fs::write(&path, "{not json").unwrap();
        assert_eq!(load(&path, &key("b", "1")), None);
    }
}
