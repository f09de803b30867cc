//! What a cell's job runs: [`JobSpec`], its `#SBATCH` options, the job
//! script, and the `node`/`started`/`exit` records that script leaves in
//! the cell's folder, read back here (they outlive Slurm's memory of the
//! job).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::JobEnd;
use crate::experiment::plan::SlurmOptions;

/// What one cell's job runs.
pub struct JobSpec<'a> {
    pub name: String,
    /// The cell's folder on the shared filesystem: the script, the config
    /// it reads, its stdout (the metric lines) and stderr.
    pub dir: &'a Path,
    pub program: &'a Path,
    pub args: &'a [String],
    pub env: BTreeMap<String, String>,
    pub workdir: PathBuf,
    /// Written to `config.toml` and fed to the job's standard input.
    pub stdin: Option<&'a str>,
    pub options: &'a SlurmOptions,
    pub wants_gpu: bool,
    /// Pin the job to this node (placement).
    pub nodelist: Option<String>,
    /// Start only after this job has ended, however it ended (`--detach`
    /// chains an experiment's cells so they still run one at a time, in
    /// plan order).
    pub after: Option<String>,
}

/// The `sbatch` options of a cell, as its script's `#SBATCH` lines.
pub fn sbatch_options(spec: &JobSpec<'_>) -> Vec<String> {
    let o = spec.options;
    let mut args = vec![
        format!("--job-name={}", spec.name),
        format!("--output={}", spec.dir.join("stdout").display()),
        format!("--error={}", spec.dir.join("stderr").display()),
        format!("--chdir={}", spec.workdir.display()),
        // A requeued job starts its output file again; the follower then
        // starts the cell again (`requeue = true`). Without it, a node
        // failure or preemption ends the cell.
        if spec.options.requeue {
            "--requeue"
        } else {
            "--no-requeue"
        }
        .to_string(),
        // A restarted run must start its output file again, whatever the
        // cluster's `JobFileAppend`: the follower reads it from the start.
        "--open-mode=truncate".to_string(),
    ];
    if o.sbatch.gres.is_none() && spec.wants_gpu {
        args.push("--gres=gpu:1".to_string());
    }
    if let Some(node) = &spec.nodelist {
        args.push(format!("--nodelist={node}"));
    }
    if let Some(job) = &spec.after {
        args.push(format!("--dependency=afterany:{job}"));
    }
    args.extend(o.sbatch.flags());
    args
}

/// An `#SBATCH` option with its value double-quoted when it holds a
/// space or quote, and `%` doubled (sbatch expands `%j` and friends in
/// file names).
fn sbatch_quoted(option: &str) -> String {
    let Some((flag, value)) = option.split_once('=') else {
        return option.to_string();
    };
    let value = value.replace('%', "%%");
    if value
        .chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '#')
    {
        format!(
            "{flag}=\"{}\"",
            value.replace('\\', "\\\\").replace('"', "\\\"")
        )
    } else {
        format!("{flag}={value}")
    }
}

/// Whether a name can be `export`ed by a POSIX shell.
pub(super) fn shell_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Single-quotes a word for `sh`.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The job script, kept in the cell's folder for reproducibility: its
/// `#SBATCH` lines carry every option, so `sbatch job.sh` runs the cell
/// again. Around the cell's command it writes three records into the
/// folder, which let a coordinator that attaches later (after Slurm has
/// forgotten the job) still tell how the cell ended: `started` (epoch
/// seconds), `node` (the node's hardware, `key=value` lines) and `exit`
/// (`code end-seconds`, written only when the command returned).
pub fn script(spec: &JobSpec<'_>) -> String {
    let mut s = String::from("#!/bin/sh\n# Written by lcx run: one cell of an experiment.\n");
    for option in sbatch_options(spec) {
        let _ = writeln!(s, "#SBATCH {}", sbatch_quoted(&option));
    }
    let dir = quote(&spec.dir.display().to_string());
    let _ = writeln!(s, "d={dir}");
    let _ = writeln!(
        s,
        "cd {} || exit 1",
        quote(&spec.workdir.display().to_string())
    );
    s.push_str(NODE_RECORD);
    for (k, v) in &spec.env {
        let _ = writeln!(s, "export {k}={}", quote(v));
    }
    let mut line = quote(&spec.program.display().to_string());
    for a in spec.args {
        line.push(' ');
        line.push_str(&quote(a));
    }
    if spec.stdin.is_some() {
        line.push_str(" < \"$d/config.toml\"");
    } else {
        line.push_str(" < /dev/null");
    }
    s.push_str(&line);
    s.push('\n');
    s.push_str(
        "code=$?\n\
         echo \"$code $(date +%s.%N)\" > \"$d/exit.tmp\" && mv \"$d/exit.tmp\" \"$d/exit\"\n\
         exit $code\n",
    );
    s
}

/// The hardware and start records of a job script (`$d` is its folder).
/// Every probe may fail on a node that lacks it; the line is then absent.
/// `started` comes last, just before the command, and whole (`mv`): a
/// follower never sees it half written, and a cell's time is its
/// command's.
const NODE_RECORD: &str = r#"rm -f "$d/exit"
{
  echo "hostname=$(hostname)"
  sed -n 's/^model name[[:space:]]*:[[:space:]]*/cpu_model=/p' /proc/cpuinfo | head -n 1
  echo "cpus=$(nproc)"
  sed -n 's/^MemTotal:[[:space:]]*\([0-9]*\) kB/memory_kib=\1/p' /proc/meminfo
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 | sed 's/^/gpu=/'
} > "$d/node" 2>/dev/null
date +%s.%N > "$d/started.tmp" && mv "$d/started.tmp" "$d/started"
"#;

/// The node record a job script wrote, when it did.
pub fn node_record(dir: &Path) -> Option<crate::store::NodeInfo> {
    let text = std::fs::read_to_string(dir.join("node")).ok()?;
    Some(parse_node(&text))
}

fn parse_node(text: &str) -> crate::store::NodeInfo {
    let mut node = crate::store::NodeInfo::default();
    let nonempty = |v: &str| Some(v.trim().to_string()).filter(|v| !v.is_empty());
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match key {
            "hostname" => node.hostname = nonempty(value),
            "cpu_model" => node.cpu_model = nonempty(value),
            "cpus" => node.cpus = value.trim().parse().ok(),
            "memory_kib" => node.memory_bytes = value.trim().parse::<i64>().ok().map(|k| k * 1024),
            "gpu" => {
                let mut fields = value.split(',');
                node.gpu_name = fields.next().and_then(nonempty);
                node.gpu_driver = fields.next().and_then(nonempty);
            }
            _ => {}
        }
    }
    node
}

/// `(exit code, end time)` from the job script's `exit` record.
pub(super) fn exit_record(dir: &Path) -> Option<(i64, f64)> {
    let text = std::fs::read_to_string(dir.join("exit")).ok()?;
    let mut words = text.split_whitespace();
    let code = words.next()?.parse().ok()?;
    let end = words.next()?.parse().ok()?;
    Some((code, end))
}

/// The seconds the cell's command ran on its node, from the job script's
/// records: queueing and the coordinator's polling are not in it.
pub fn ran_seconds(dir: &Path) -> Option<f64> {
    let started: f64 = std::fs::read_to_string(dir.join("started"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let (_, end) = exit_record(dir)?;
    (end >= started).then_some(end - started)
}

/// A job's end read from its `exit` record, for a job Slurm no longer
/// lists (it ended more than `MinJobAge` ago, before anyone followed it).
pub(super) fn end_from_record(dir: &Path) -> Option<JobEnd> {
    let (code, _) = exit_record(dir)?;
    // A shell reports a command killed by signal N as 128 + N.
    let (exit_code, signal) = if code > 128 {
        (None, Some(code - 128))
    } else {
        (Some(code), None)
    };
    Some(JobEnd {
        exit_code,
        signal,
        how: format!(
            "exit code {code}, from the job's exit record (Slurm no longer lists the job)"
        ),
        success: code == 0,
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::experiment::plan::SbatchOptions;

    #[test]
    fn sbatch_values_with_spaces_or_percent_are_quoted() {
        assert_eq!(
            sbatch_quoted("--job-name=lcx-a b-5"),
            "--job-name=\"lcx-a b-5\""
        );
        assert_eq!(sbatch_quoted("--output=/x/%j/out"), "--output=/x/%%j/out");
        assert_eq!(sbatch_quoted("--no-requeue"), "--no-requeue");
        assert!(shell_name("LCX_ARM") && shell_name("_x1"));
        assert!(!shell_name("A B") && !shell_name("1X") && !shell_name("a;b") && !shell_name(""));
    }

    #[test]
    fn the_job_script_quotes_and_feeds_the_config() {
        let dir = Path::new("/shared/runs/slurm/3/run-5-1");
        let options = SlurmOptions {
            sbatch: SbatchOptions {
                partition: Some("gpu".into()),
                time: Some("10".into()),
                extra: vec!["--exclusive".into()],
                ..SbatchOptions::default()
            },
            ..SlurmOptions::default()
        };
        let args = vec!["train".to_string(), "it's".to_string()];
        let spec = JobSpec {
            name: "lcx-3-5".into(),
            dir,
            program: Path::new("/opt/lcx"),
            args: &args,
            env: BTreeMap::from([("LCX_ARM".to_string(), "a b".to_string())]),
            workdir: PathBuf::from("/shared/work"),
            stdin: Some("x = 1"),
            options: &options,
            wants_gpu: true,
            nodelist: Some("node7".into()),
            after: Some("41".into()),
        };
        let s = script(&spec);
        assert!(s.contains("cd '/shared/work' || exit 1"), "{s}");
        assert!(s.contains("d='/shared/runs/slurm/3/run-5-1'\n"), "{s}");
        assert!(s.contains("export LCX_ARM='a b'"), "{s}");
        assert!(
            s.contains("\n'/opt/lcx' 'train' 'it'\\''s' < \"$d/config.toml\"\ncode=$?\n"),
            "{s}"
        );
        assert!(s.ends_with("exit $code\n"), "{s}");
        let requeued = SlurmOptions {
            requeue: true,
            ..options.clone()
        };
        let with_requeue = script(&JobSpec {
            options: &requeued,
            ..spec_clone(&spec)
        });
        assert!(
            with_requeue.contains("\n#SBATCH --requeue\n"),
            "{with_requeue}"
        );
        assert!(!with_requeue.contains("--no-requeue"), "{with_requeue}");
        for want in [
            "--partition=gpu",
            "--time=10",
            "--gres=gpu:1",
            "--exclusive",
            "--nodelist=node7",
            "--dependency=afterany:41",
            "--no-requeue",
            "--output=/shared/runs/slurm/3/run-5-1/stdout",
        ] {
            assert!(s.contains(&format!("\n#SBATCH {want}\n")), "{want}: {s}");
        }
    }

    /// Shell words in every option and the job name stay inside their
    /// `#SBATCH` lines (comments to `sh`): the script's commands are the
    /// same as with plain values.
    #[test]
    fn hostile_option_values_stay_inside_their_sbatch_lines() {
        let commands = |value: &str| {
            let some = Some(value.to_string());
            let options = SlurmOptions {
                sbatch: SbatchOptions {
                    partition: some.clone(),
                    account: some.clone(),
                    qos: some.clone(),
                    time: some.clone(),
                    mem: some.clone(),
                    gres: some.clone(),
                    constraint: some,
                    extra: vec![format!("--comment={value}")],
                    ..SbatchOptions::default()
                },
                ..SlurmOptions::default()
            };
            let s = script(&JobSpec {
                name: format!("lcx-{value}-1"),
                dir: Path::new("/shared/run-1"),
                program: Path::new("/opt/lcx"),
                args: &[],
                env: BTreeMap::new(),
                workdir: PathBuf::from("/shared"),
                stdin: None,
                options: &options,
                wants_gpu: false,
                nodelist: None,
                after: None,
            });
            let sbatch = s.lines().filter(|l| l.starts_with("#SBATCH ")).count();
            let rest: Vec<String> = s
                .lines()
                .filter(|l| !l.starts_with("#SBATCH "))
                .map(str::to_string)
                .collect();
            (sbatch, rest)
        };
        let plain = commands("x");
        for hostile in [
            "x;touch pwned",
            "$(touch pwned)",
            "`touch pwned`",
            "x'y",
            "x\"y",
            "x # y",
            "x\\",
        ] {
            assert_eq!(commands(hostile), plain, "{hostile}");
        }
    }

    fn spec_clone<'a>(spec: &JobSpec<'a>) -> JobSpec<'a> {
        JobSpec {
            name: spec.name.clone(),
            dir: spec.dir,
            program: spec.program,
            args: spec.args,
            env: spec.env.clone(),
            workdir: spec.workdir.clone(),
            stdin: spec.stdin,
            options: spec.options,
            wants_gpu: spec.wants_gpu,
            nodelist: spec.nodelist.clone(),
            after: spec.after.clone(),
        }
    }

    /// The job script is a plain shell script (its `#SBATCH` lines are
    /// comments to `sh`): run it here and read the records it leaves.
    #[test]
    fn the_job_script_records_its_start_node_and_exit() {
        let dir = tempfile::tempdir().unwrap();
        let options = SlurmOptions::default();
        let args = vec!["-c".to_string(), "read x; echo \"$x\"; exit 3".to_string()];
        let spec = JobSpec {
            name: "lcx-t-1".into(),
            dir: dir.path(),
            program: Path::new("/bin/sh"),
            args: &args,
            env: BTreeMap::new(),
            workdir: dir.path().to_path_buf(),
            stdin: Some("fed"),
            options: &options,
            wants_gpu: false,
            nodelist: None,
            after: None,
        };
        std::fs::write(dir.path().join("config.toml"), "fed\n").unwrap();
        std::fs::write(dir.path().join("job.sh"), script(&spec)).unwrap();
        let out = Command::new("sh")
            .arg(dir.path().join("job.sh"))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "the command's exit code is the job's"
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "fed\n");
        let node = node_record(dir.path()).expect("a node record");
        assert_eq!(node.hostname, crate::system::host::hostname());
        assert!(node.cpus.is_some_and(|n| n >= 1), "{node:?}");
        assert!(node.memory_bytes.is_some_and(|b| b > 0), "{node:?}");
        let end = end_from_record(dir.path()).expect("an exit record");
        assert_eq!((end.exit_code, end.success), (Some(3), false));
        assert!(ran_seconds(dir.path()).is_some_and(|s| (0.0..60.0).contains(&s)));
    }

    #[test]
    fn node_and_exit_records_parse() {
        let node = parse_node(
            "hostname=n7\ncpu_model=AMD EPYC 9654 96-Core Processor\ncpus=16\n\
             memory_kib=1024\ngpu=NVIDIA H200, 570.86.15\njunk\n",
        );
        assert_eq!(node.hostname.as_deref(), Some("n7"));
        assert_eq!(node.cpus, Some(16));
        assert_eq!(node.memory_bytes, Some(1024 * 1024));
        assert_eq!(node.gpu_name.as_deref(), Some("NVIDIA H200"));
        assert_eq!(node.gpu_driver.as_deref(), Some("570.86.15"));
        assert_eq!(
            node.hardware().as_deref(),
            Some("AMD EPYC 9654 96-Core Processor, 16 CPUs, NVIDIA H200 (driver 570.86.15)")
        );
        let dir = tempfile::tempdir().unwrap();
        assert!(end_from_record(dir.path()).is_none());
        std::fs::write(dir.path().join("exit"), "0 100.5\n").unwrap();
        std::fs::write(dir.path().join("started"), "90.25\n").unwrap();
        let end = end_from_record(dir.path()).unwrap();
        assert!(end.success && end.status.is_none());
        assert_eq!(ran_seconds(dir.path()), Some(10.25));
        std::fs::write(dir.path().join("exit"), "137 100.5\n").unwrap();
        let killed = end_from_record(dir.path()).unwrap();
        assert_eq!((killed.exit_code, killed.signal), (None, Some(9)));
    }
}
