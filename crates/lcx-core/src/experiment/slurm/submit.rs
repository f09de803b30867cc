//! Handing a cell to Slurm: its folder written (script, config), an
//! earlier attempt's files cleared, and `sbatch` run for the job id.

use std::process::{Command, Stdio};

use super::script::{sbatch_options, script, shell_name, JobSpec};

/// Writes the script (and config) and submits the job; returns its id.
pub fn submit(spec: &JobSpec<'_>) -> Result<String, String> {
    if let Some(bad) = spec.env.keys().find(|k| !shell_name(k)) {
        return Err(format!(
            "environment variable `{bad}` cannot be exported by a job script \
             (a Slurm cell's names are letters, digits and `_`)"
        ));
    }
    // The plan reader refuses control characters in options and names;
    // a plan stored before it did must not smuggle a line into the script.
    if let Some(bad) = sbatch_options(spec)
        .into_iter()
        .find(|o| o.chars().any(char::is_control))
    {
        return Err(format!(
            "sbatch option {bad:?} holds a control character and would break out of its \
             #SBATCH line; options must be one line"
        ));
    }
    std::fs::create_dir_all(spec.dir)
        .map_err(|e| format!("creating {}: {e}", spec.dir.display()))?;
    if let Some(text) = spec.stdin {
        let path = spec.dir.join("config.toml");
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let path = spec.dir.join("job.sh");
    std::fs::write(&path, script(spec)).map_err(|e| format!("writing {}: {e}", path.display()))?;
    // Output files and records from an earlier attempt must not be read
    // as this one's.
    for name in [
        "stdout",
        "stderr",
        "started",
        "node",
        "exit",
        "started.tmp",
        "exit.tmp",
    ] {
        let _ = std::fs::remove_file(spec.dir.join(name));
    }
    // The options go on the command line as well: `SBATCH_*` variables in
    // the user's environment outrank `#SBATCH` lines, not the command line.
    let out = Command::new("sbatch")
        .arg("--parsable")
        .args(sbatch_options(spec))
        .arg(&path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run sbatch: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "sbatch refused the job: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // `--parsable` prints `id` or `id;cluster`.
    let id = text.trim().split(';').next().unwrap_or("").to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return Err(format!("sbatch printed no job id: {:?}", text.trim()));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::experiment::plan::{SbatchOptions, SlurmOptions};

    #[test]
    fn an_option_of_two_lines_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("job");
        let options = SlurmOptions {
            sbatch: SbatchOptions {
                partition: Some("gpu\ntouch pwned".into()),
                ..SbatchOptions::default()
            },
            ..SlurmOptions::default()
        };
        let spec = JobSpec {
            name: "lcx-x-1".into(),
            dir: &job,
            program: Path::new("/bin/true"),
            args: &[],
            env: BTreeMap::new(),
            workdir: PathBuf::from("/"),
            stdin: None,
            options: &options,
            wants_gpu: false,
            nodelist: None,
            after: None,
        };
        let err = submit(&spec).unwrap_err();
        assert!(err.contains("would break out of its #SBATCH line"), "{err}");
        assert!(!job.exists());
    }
}
