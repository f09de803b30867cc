//! A whole training run (docs/deep-cfr.md §8.2, §9): the run directory, iterations until
//! `max_iterations` or `max_minutes`, checkpoints, `metrics.jsonl`,
//! `train.log` and the optional metrics stream for the experiment runner.
//!
//! Every metrics line is written with one `write_all` and flushed, and
//! checkpoints are renamed into place, so an interrupted run leaves whole
//! lines and whole checkpoints.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::run::train::{Metrics, TrainError, Trainer};
use lcx_core::config::TrainerConfig;

/// How to run.
pub struct SessionOptions {
    /// Where run directories go (`runs/`).
    pub runs_root: PathBuf,
    /// Keep the run under `runs/` instead of `runs/tmp/`.
    pub keep: bool,
    /// A checkpoint (either of its two files) to continue from.
    pub resume: Option<PathBuf>,
    /// A second metrics sink (stdout or a file) for the experiment runner.
    pub metrics_out: Option<Box<dyn Write>>,
}

/// Errors of a run.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error("{path}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
    move |source| SessionError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `experiment_name` lowercased, runs of other characters than a–z/0–9
/// turned into `-`, ends trimmed; `run` when nothing is left.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for ch in name.to_lowercase().chars() {
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() {
            out.push(ch);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_matches('-');
    if trimmed.is_empty() {
        "run".into()
    } else {
        trimmed.into()
    }
}

/// Whether the next evaluation after `iteration` falls beyond
/// `max_iterations` (docs/deep-cfr.md §9's start-up warning).
pub fn eval_never_runs(iteration: u64, eval_every: u64, max_iterations: u64) -> bool {
    if eval_every == 0 {
        return false;
    }
    let next = (iteration / eval_every + 1) * eval_every;
    next > max_iterations
}

struct Log {
    file: File,
    path: PathBuf,
}

impl Log {
    fn event(&mut self, msg: &str) -> Result<(), SessionError> {
        let stamp = chrono::Local::now().format("%Y-%m-%dT%H:%M:%S");
        let line = format!("{stamp} {msg}\n");
        eprint!("{line}");
        self.file.write_all(line.as_bytes()).map_err(io(&self.path))
    }
}

/// One metrics line: the numbers, then the text fields (`precision`).
fn json_line(m: &Metrics, texts: &[(&str, &str)]) -> String {
    let mut obj = serde_json::Map::new();
    for (k, v) in m {
        let value = if k == "iteration" {
            serde_json::Value::from(*v as u64)
        } else {
            serde_json::Number::from_f64(*v)
                .map_or(serde_json::Value::Null, serde_json::Value::Number)
        };
        obj.insert(k.clone(), value);
    }
    for (k, v) in texts {
        obj.insert((*k).to_string(), serde_json::Value::from(*v));
    }
    let mut line = serde_json::Value::Object(obj).to_string();
    line.push('\n');
    line
}

/// Trains until `run.max_iterations` or `run.max_minutes`; returns the run
/// directory.
pub fn run(config: TrainerConfig, mut opts: SessionOptions) -> Result<PathBuf, SessionError> {
    let mut trainer = Trainer::new(config.clone())?;
    let dir = match &opts.resume {
        Some(path) => {
            let it = trainer.load_checkpoint(path)?;
            let dir = path
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
            eprintln!(
                "resumed from {} at iteration {it}; memories, RNGs and the grad scaler start fresh",
                path.display()
            );
            dir
        }
        None => {
            let stamp = chrono::Local::now().format("%Y-%m-%d_%H%M%S");
            let base = if opts.keep {
                opts.runs_root.clone()
            } else {
                opts.runs_root.join("tmp")
            };
            let mut dir = base.join(format!("{stamp}_{}", slug(&config.run.experiment_name)));
            let mut n = 2;
            while dir.exists() {
                dir = base.join(format!("{stamp}_{}-{n}", slug(&config.run.experiment_name)));
                n += 1;
            }
            dir
        }
    };
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let config_path = dir.join("config.toml");
    if !config_path.exists() {
        std::fs::write(&config_path, config.to_toml()).map_err(io(&config_path))?;
    }
    let metrics_path = dir.join("metrics.jsonl");
    let mut metrics_file = OpenOptions::new()
        .create(true)
        .append(trainer.iteration > 0)
        .write(true)
        .truncate(trainer.iteration == 0)
        .open(&metrics_path)
        .map_err(io(&metrics_path))?;
    let log_path = dir.join("train.log");
    let mut log = Log {
        file: OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io(&log_path))?,
        path: log_path,
    };
    log.event(&format!("run directory {}", dir.display()))?;
    let amp_fallback = trainer.amp_falls_back_to_fp32();
    if let Some(why) = &amp_fallback {
        log.event(&format!(
            "run.use_amp: training in fp32 (amp/grad_scale stays 1.0): {why}"
        ))?;
    }
    let max_iterations = config.run.max_iterations;
    if let Some(max) = max_iterations {
        if eval_never_runs(
            trainer.iteration,
            u64::from(config.evaluation.eval_every),
            max,
        ) {
            log.event("warning: evaluation.eval_every is beyond run.max_iterations; no evaluation will run")?;
        }
    }
    let start = Instant::now();
    let training_kernel = trainer.training_kernel();
    loop {
        if max_iterations.is_some_and(|max| trainer.iteration >= max) {
            break;
        }
        let mut m = trainer.run_iteration()?;
        let t = trainer.iteration;
        let ckpt_start = Instant::now();
        let ck = &config.checkpoint;
        if ck.save_every > 0 && t % u64::from(ck.save_every) == 0 {
            trainer.save_checkpoint(&dir, &format!("iteration_{t:05}"))?;
        }
        if ck.save_latest {
            trainer.save_checkpoint(&dir, "latest")?;
        }
        if ck.save_every > 0 || ck.save_latest {
            let secs = ckpt_start.elapsed().as_secs_f64();
            m.insert("time/checkpoint_seconds".into(), secs);
            if let Some(it) = m.get_mut("time/iteration_seconds") {
                *it += secs;
            }
        }
        // What ran, beside what was asked: an AMP arm on a CPU says fp32,
        // and the kernel its steps ran on.
        let mut texts = vec![
            ("precision", trainer.precision()),
            ("precision_requested", trainer.precision_requested()),
            ("training_kernel", &training_kernel),
        ];
        if let Some(why) = &amp_fallback {
            texts.push(("precision_reason", why));
        }
        let line = json_line(&m, &texts);
        metrics_file
            .write_all(line.as_bytes())
            .map_err(io(&metrics_path))?;
        metrics_file.flush().map_err(io(&metrics_path))?;
        if let Some(out) = opts.metrics_out.as_mut() {
            out.write_all(line.as_bytes())
                .and_then(|()| out.flush())
                .map_err(io(Path::new("--metrics-out")))?;
        }
        let iter_s = m.get("time/iteration_seconds").copied().unwrap_or(0.0);
        let mut summary = format!(
            "[i={t}] Iteration complete traversal_nodes={} nodes_per_second={:.0} advantage_loss={:.4} strategy_loss={:.4} iteration_seconds={:.2} iters_per_hour={:.1}",
            m.get("traversal/nodes").copied().unwrap_or(0.0),
            m.get("traversal/nodes_per_second").copied().unwrap_or(0.0),
            m.get("loss/advantage").copied().unwrap_or(0.0),
            m.get("loss/strategy").copied().unwrap_or(0.0),
            iter_s,
            if iter_s > 0.0 { 3600.0 / iter_s } else { 0.0 },
        );
        if let Some(e) = m.get("time/evaluation_seconds") {
            summary.push_str(&format!(
                " eval_seconds={e:.2}({:.0}%)",
                100.0 * e / iter_s.max(1e-9)
            ));
            for (k, v) in &m {
                if k.ends_with("/win_rate0") || k.ends_with("/avg_score_diff0") {
                    summary.push_str(&format!(" {k}={v:.3}"));
                }
            }
        }
        log.event(&summary)?;
        if let Some(minutes) = config.run.max_minutes {
            if start.elapsed().as_secs_f64() >= minutes * 60.0 {
                log.event(&format!("run.max_minutes = {minutes} reached"))?;
                break;
            }
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_and_eval_warning() {
        assert_eq!(slug("Deep CFR -- default!"), "deep-cfr-default");
        assert_eq!(slug("***"), "run");
        assert!(eval_never_runs(0, 10, 5));
        assert!(!eval_never_runs(49, 50, 50));
        assert!(!eval_never_runs(50, 100, 100));
        assert!(eval_never_runs(0, 50, 10));
        assert!(!eval_never_runs(0, 0, 1));
    }
}
