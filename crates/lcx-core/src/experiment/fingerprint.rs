//! Where an experiment ran: host and device fingerprint and the git state
//! of the working directory. Every probe is best-effort: a missing `git`,
//! `nvidia-smi` or `/proc` file leaves its field empty instead of failing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::store::Fingerprint;

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

/// Probes the machine, its measured FP32 and memory ceiling included
/// (`lcx bench peak`, about 0.3 s). The torch fields come from `torch`
/// ([`torch_facts`]) and stay empty without it: an experiment of command
/// arms never loads libtorch.
pub fn probe(torch: Option<&TorchFacts>) -> Fingerprint {
    let (gpu_name, gpu_driver, cuda_version) = nvidia_smi();
    let peak = crate::bench::peak::measure();
    Fingerprint {
        peak_isa: Some(peak.isa.to_string()),
        peak_fp32_gflops_core: Some(peak.gflops_core),
        peak_fp32_gflops: Some(peak.gflops),
        peak_stream_gbytes_per_second: Some(peak.stream_gbytes_per_second),
        // The same name the runner identity records (store::liveness).
        hostname: crate::store::hostname(),
        os: Some(os_description()),
        cpu_model: cpu_model(),
        cpu_cores: std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as i64),
        memory_bytes: memory_bytes(),
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
        hostname: crate::store::hostname(),
        cpu_model: cpu_model(),
        cpus: std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as i64),
        memory_bytes: memory_bytes(),
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

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn os_description() -> String {
    let pretty = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        });
    let kernel = read_trimmed("/proc/sys/kernel/osrelease");
    let mut parts = vec![format!(
        "{} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    )];
    parts.extend(pretty);
    parts.extend(kernel.map(|k| format!("kernel {k}")));
    parts.join(", ")
}

fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines().find_map(|l| {
        let (key, value) = l.split_once(':')?;
        (key.trim() == "model name").then(|| value.trim().to_string())
    })
}

fn memory_bytes() -> Option<i64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
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

    #[test]
    fn os_description_names_the_os() {
        assert!(os_description().starts_with(std::env::consts::OS));
    }
}
