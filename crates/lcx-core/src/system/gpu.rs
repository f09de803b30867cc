//! GPU clocks from `nvidia-smi`, where it is installed. lcx links no GPU
//! library of its own (`lcx system` needs no libtorch), so the driver's
//! command line tool is the one way to ask.

use std::process::{Command, Stdio};

/// What `nvidia-smi` says of one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    pub name: String,
    /// The streaming multiprocessors' clock now and at most, in MHz.
    pub sm_mhz: Option<f64>,
    pub max_sm_mhz: Option<f64>,
    pub memory_mhz: Option<f64>,
    /// Persistence mode: without it the driver unloads between programs
    /// and the next one's start pays for initialising the device again.
    pub persistence: Option<bool>,
}

/// Compute processes on the host's GPUs (`nvidia-smi`); the runner
/// counts them while no cell runs, so every one is another program's.
/// `None` without `nvidia-smi` (no GPU, or not NVIDIA) or when it fails:
/// unknown, not zero.
pub fn compute_processes() -> Option<i64> {
    let out = Command::new("nvidia-smi")
        .args(["--query-compute-apps=pid", "--format=csv,noheader"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.lines().filter(|l| !l.trim().is_empty()).count() as i64)
}

/// The GPUs: `Ok(None)` when `nvidia-smi` is not installed (no NVIDIA
/// GPU, as far as lcx can tell); `Err` with what went wrong when it is
/// there and fails.
pub fn gpus() -> Result<Option<Vec<Gpu>>, String> {
    let out = Command::new("nvidia-smi")
        .args([
            "--query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,persistence_mode",
            "--format=csv,noheader,nounits",
        ])
        .stdin(Stdio::null())
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("nvidia-smi: {e}")),
    };
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
        return Err(format!("nvidia-smi failed ({}): {said}", out.status));
    }
    Ok(Some(parse(&String::from_utf8_lossy(&out.stdout))))
}

/// `nvidia-smi --format=csv,noheader,nounits`: one GPU a line; a value it
/// cannot read says `[N/A]` or `[Not Supported]` and reads as unknown.
fn parse(text: &str) -> Vec<Gpu> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            let mhz = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok());
            Gpu {
                name: f.first().unwrap_or(&"").to_string(),
                sm_mhz: mhz(1),
                max_sm_mhz: mhz(2),
                memory_mhz: mhz(3),
                persistence: match f.get(4).copied() {
                    Some("Enabled") => Some(true),
                    Some("Disabled") => Some(false),
                    _ => None,
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_is_a_gpu_and_what_it_cannot_say_is_unknown() {
        let gpus = parse(
            "NVIDIA H200, 1980, 1980, 3201, Enabled\n\
             Tesla T4, [N/A], 1590, 5000, Disabled\n\n",
        );
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].name, "NVIDIA H200");
        assert_eq!(
            (gpus[0].sm_mhz, gpus[0].max_sm_mhz, gpus[0].memory_mhz),
            (Some(1980.0), Some(1980.0), Some(3201.0))
        );
        assert_eq!(gpus[0].persistence, Some(true));
        assert_eq!(gpus[1].sm_mhz, None);
        assert_eq!(gpus[1].persistence, Some(false));
        assert!(parse("").is_empty());
    }
}
