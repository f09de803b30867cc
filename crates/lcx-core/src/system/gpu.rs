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

/// Memory in use on CUDA device `index` (as the process numbers its
/// devices), in MiB, whoever uses it: the trainer's own footprint on a GPU
/// it has to itself. `None` without `nvidia-smi` or when it cannot say.
pub fn memory_used_mib(index: usize) -> Option<f64> {
    let id = smi_device_id(index, std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref());
    let out = Command::new("nvidia-smi")
        .args([
            "-i",
            &id,
            "--query-gpu=memory.used",
            "--format=csv,noheader,nounits",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .and_then(|l| l.trim().parse::<f64>().ok())
}

/// The `nvidia-smi -i` id of the process's CUDA device `index`: with
/// `CUDA_VISIBLE_DEVICES` set, the process's device 0 is the first device
/// listed there (an index or a UUID, both of which `-i` takes), not the
/// host's device 0.
fn smi_device_id(index: usize, visible: Option<&str>) -> String {
    visible
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .and_then(|v| v.split(',').nth(index))
        .map_or_else(|| index.to_string(), |id| id.trim().to_string())
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
    fn a_process_device_is_named_through_cuda_visible_devices() {
        assert_eq!(smi_device_id(0, None), "0");
        assert_eq!(smi_device_id(1, Some("")), "1");
        assert_eq!(smi_device_id(0, Some("3,1")), "3");
        assert_eq!(smi_device_id(1, Some("3, 1")), "1");
        assert_eq!(smi_device_id(0, Some("GPU-8f2e")), "GPU-8f2e");
        // More devices asked for than listed: the index as it is.
        assert_eq!(smi_device_id(2, Some("3,1")), "2");
    }

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
