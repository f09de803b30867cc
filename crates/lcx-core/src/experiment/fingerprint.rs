//! Where an experiment ran: host and device fingerprint and the git state
//! of the working directory. Every probe is best-effort: a missing `git`,
//! `nvidia-smi` or `/proc` file leaves its field empty instead of failing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::bench::peak::cache::{self, Ceiling, HostKey};
// Where a ceiling came from is the peak cache's to say; an experiment's
// fingerprint records it under these names.
pub use crate::bench::peak::cache::{KnownCeiling, PeakSource};
use crate::store::{Fingerprint, Store};

/// What libtorch says of this machine, as `lcx version --json` prints it.
/// Only `lcx-torch` links libtorch, so a runner asks it in a child process
/// ([`torch_facts`]), and only for experiments that train.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TorchFacts {
    pub lcx_version: String,
    pub torch_version: String,
    pub cuda_available: bool,
    pub cuda_devices: usize,
    pub torch_intra_threads: i32,
    pub torch_inter_threads: i32,
}

/// Runs `lcx_exe version --json` (libtorch's start-up, about 0.7 s) and
/// reads its answer; `None` when the binary cannot be run or answers
/// something else, as every probe here is best-effort. Each binary is asked
/// once per process: the fingerprint, the runner's CUDA check and every
/// probe experiment of a bisect share the answer.
pub fn torch_facts(lcx_exe: &Path) -> Option<TorchFacts> {
    static ASKED: Mutex<Vec<(PathBuf, Option<TorchFacts>)>> = Mutex::new(Vec::new());
    let mut asked = ASKED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, facts)) = asked.iter().find(|(exe, _)| exe == lcx_exe) {
        return facts.clone();
    }
    let facts = ask_torch(lcx_exe);
    asked.push((lcx_exe.to_path_buf(), facts.clone()));
    facts
}

fn ask_torch(lcx_exe: &Path) -> Option<TorchFacts> {
    let out = Command::new(lcx_exe)
        .args(["version", "--json"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// This host's FP32 ceiling: the best clean probe of this boot from the
/// user's cache file or `store`'s `host_peaks` (no probe at all), else a
/// probe now, folded into both when it is clean. A probe with no clean try
/// is kept in the cache file as a floor, flagged `disturbed`, so that the
/// next runs of a busy boot do not pay for another; a clean probe (a
/// `refresh`, or a runner's re-probe) replaces it. `refresh` probes even
/// when an entry exists (the entry still keeps the best value seen).
pub fn known_ceiling(mut store: Option<&mut Store>, refresh: bool) -> KnownCeiling {
    let key = HostKey::here();
    let file = cache::file_path();
    // A ceiling probed at another width (one cached before lcx probed
    // AVX-512) is not this host's ceiling: it is probed again, and the new
    // probe replaces it.
    let isa = crate::bench::peak::Isa::here().name();
    let from_file = |key: &HostKey| {
        file.as_deref()
            .and_then(|p| cache::load(p, key))
            .filter(|c| c.isa == isa)
    };
    let (in_file, in_db) = match &key {
        Some(key) => (
            from_file(key),
            store
                .as_deref()
                .and_then(|s| s.host_peak(key).ok().flatten())
                .filter(|c| c.isa == isa),
        ),
        None => (None, None),
    };
    // A clean ceiling outranks any floor.
    let known = [in_file.clone(), in_db.clone()]
        .into_iter()
        .flatten()
        .max_by(|a, b| {
            (!a.disturbed)
                .cmp(&!b.disturbed)
                .then(a.gflops.total_cmp(&b.gflops))
        });
    // Best-effort: a cache that cannot be written costs a probe later. A
    // database's `host_peaks` holds clean ceilings only.
    let save_db = |store: &mut Option<&mut Store>, c: &Ceiling| {
        if let (Some(s), false) = (store.as_deref_mut(), c.disturbed) {
            let _ = s.save_host_peak(c);
        }
    };
    let save = |store: &mut Option<&mut Store>, c: &Ceiling| {
        if let Some(p) = &file {
            let _ = cache::save(p, c);
        }
        save_db(store, c);
    };
    let cached = |c: Ceiling| KnownCeiling::new(c, PeakSource::Cached, None);
    if let (false, Some(c)) = (refresh, &known) {
        // Each place learns what the other knew better.
        if in_file.as_ref() != Some(c) || (!c.disturbed && in_db.as_ref() != Some(c)) {
            save(&mut store, c);
        }
        return cached(c.clone());
    }
    // One probe at a time per cache: a run that waited reads the entry the
    // other one just wrote instead of probing beside it.
    let _probing = file.as_deref().and_then(cache::probe_lock);
    if let (false, Some(key)) = (refresh, &key) {
        if let Some(c) = from_file(key) {
            save_db(&mut store, &c);
            return cached(c);
        }
    }
    let peak = crate::bench::peak::measure();
    let now = cache::now();
    let blank = || HostKey {
        hostname: String::new(),
        boot_id: String::new(),
        governor: String::new(),
        cpu_model: String::new(),
        cpus: String::new(),
    };
    let ceiling = match known {
        Some(old) => old.fold(&peak, &now),
        None => Ceiling::of(key.clone().unwrap_or_else(blank), &peak, &now),
    };
    if key.is_some() {
        save(&mut store, &ceiling);
    }
    KnownCeiling::new(ceiling, PeakSource::Probed, Some(peak))
}

/// Probes the machine; its FP32 and memory ceiling is `ceiling`
/// ([`known_ceiling`]), none for an experiment without a roofline. The
/// torch fields come from `torch` ([`torch_facts`]) and stay empty without
/// it: an experiment of command arms never loads libtorch.
pub fn probe(torch: Option<&TorchFacts>, ceiling: Option<&KnownCeiling>) -> Fingerprint {
    let (gpu_name, gpu_driver, cuda_version) = nvidia_smi();
    let c = ceiling.map(|k| &k.ceiling);
    Fingerprint {
        peak_isa: c.map(|c| c.isa.clone()),
        peak_fp32_gflops_core: c.map(|c| c.gflops_core),
        peak_fp32_gflops: c.map(|c| c.gflops),
        peak_stream_gbytes_per_second: c.map(|c| c.stream_gbytes_per_second),
        peak_source: ceiling.map(|k| k.source.as_str().to_string()),
        peak_tries: c.map(|c| c.tries as i64),
        peak_spread: c.map(|c| c.spread),
        peak_probed_at: c.map(|c| c.probed_at.clone()),
        peak_note: None,
        // The runner identity's name (store::liveness), unless
        // LCX_HOSTNAME names the host for history.
        hostname: crate::system::host::recorded_hostname(),
        os: Some(crate::system::Root::default().os_description()),
        cpu_model: crate::system::Root::default().cpu_model(),
        cpu_cores: std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as i64),
        memory_bytes: crate::system::Root::default().memory_bytes(),
        gpu_name,
        gpu_driver,
        cuda_version,
        cuda_available: torch.map(|t| t.cuda_available),
        torch_version: torch.map(|t| t.torch_version.clone()),
        torch_intra_threads: torch.map(|t| i64::from(t.torch_intra_threads)),
        torch_inter_threads: torch.map(|t| i64::from(t.torch_inter_threads)),
    }
}

/// The hardware a local cell runs on: this machine, as a Slurm job's
/// script records its node (`experiment::slurm`). Torch-free and cheap
/// (two `/proc` reads and `nvidia-smi` where present).
pub fn node() -> crate::store::NodeInfo {
    let (gpu_name, gpu_driver, _) = nvidia_smi();
    crate::store::NodeInfo {
        hostname: crate::system::host::hostname(),
        cpu_model: crate::system::Root::default().cpu_model(),
        cpus: std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as i64),
        memory_bytes: crate::system::Root::default().memory_bytes(),
        gpu_name,
        gpu_driver,
    }
}

/// `(commit, dirty)` of the git work tree containing `dir`; `(None, None)`
/// outside a repository, without git, or before the first commit.
pub fn git_state(dir: &Path) -> (Option<String>, Option<bool>) {
    let commit = run(dir, &["rev-parse", "HEAD"]);
    let Some(commit) = commit else {
        // No commit yet (or no repo): a dirty flag alone still helps.
        let dirty = run(dir, &["status", "--porcelain"]).map(|s| !s.is_empty());
        return (None, dirty);
    };
    let dirty = run(dir, &["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty());
    (Some(commit), dirty)
}

/// `file`'s path from the root of the git repository holding it
/// (`experiments/option-b.toml`), so that a report's reproduce line works
/// in any clone; `None` outside a repository or without git.
pub fn path_in_repo(file: &Path) -> Option<String> {
    let file = file.canonicalize().ok()?;
    let root = run(file.parent()?, &["rev-parse", "--show-toplevel"])?;
    let root = Path::new(&root).canonicalize().ok()?;
    let rel = file.strip_prefix(&root).ok()?;
    rel.to_str().map(str::to_string)
}

fn run(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// GPU name, driver version and the driver's CUDA version from
/// `nvidia-smi`; all `None` when it is absent or fails.
fn nvidia_smi() -> (Option<String>, Option<String>, Option<String>) {
    let query = Command::new("nvidia-smi")
        .args(["--query-gpu=name,driver_version", "--format=csv,noheader"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let Ok(out) = query else {
        return (None, None, None);
    };
    if !out.status.success() {
        return (None, None, None);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or_default();
    let mut fields = first.split(',').map(|s| s.trim().to_string());
    let name = fields.next().filter(|s| !s.is_empty());
    let driver = fields.next().filter(|s| !s.is_empty());
    // The banner of plain `nvidia-smi` carries "CUDA Version: 12.4".
    let cuda = Command::new("nvidia-smi")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            let rest = text.split("CUDA Version:").nth(1)?;
            rest.split_whitespace()
                .next()
                .map(|v| v.trim_end_matches('|').to_string())
        });
    (name, driver, cuda)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_in_a_repository_is_given_from_its_root() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("experiments/e.toml");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "").unwrap();
        assert_eq!(path_in_repo(&file), None, "not a repository yet");
        let git = Command::new("git")
            .args(["init", "-q"])
            .current_dir(dir.path())
            .status();
        if git.is_ok_and(|s| s.success()) {
            assert_eq!(path_in_repo(&file).as_deref(), Some("experiments/e.toml"));
        } else {
            panic!("git is needed by lcx's provenance and by this test");
        }
    }

    #[test]
    fn git_state_outside_a_repo_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let (commit, _) = git_state(dir.path());
        assert_eq!(commit, None);
    }
}
