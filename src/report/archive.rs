//! `lcx report --archive`: writes `<dir>/YYYY-MM-DD-<slug>.md` with its SVG
//! plots beside it, never overwriting anything (a taken name gets `-2`,
//! `-3`, …). Recording the file in the `reports` table is the caller's job.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::store::report_read::IterationPoint;

use super::model::{ColumnKind, Report};
use super::plots::{iteration_plot, speedup_plot, PlotError};
use super::render::render_markdown;

/// Why an archive could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("creating archive directory {}", path.display())]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no free file name for {} after 9999 tries", path.display())]
    NoName { path: PathBuf },
    #[error("refusing to archive under the name `{0}`: not a plain file name")]
    BadName(String),
    #[error(transparent)]
    Plot(#[from] PlotError),
}

/// What was written.
#[derive(Debug, Clone)]
pub struct Archived {
    pub markdown: PathBuf,
    pub plots: Vec<PathBuf>,
    /// The markdown as written (with plot links).
    pub text: String,
}

/// A plot ready to be written: (title, file-name suffix, SVG text).
pub type Plot = (String, String, String);

/// `Option B: interleaved!` → `option-b-interleaved`.
pub fn slugify(name: &str) -> String {
    let mut slug = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    let slug: String = slug.trim_end_matches('-').chars().take(60).collect();
    let slug = slug.trim_end_matches('-').to_string();
    if slug.is_empty() {
        "experiment".into()
    } else {
        slug
    }
}

/// The plots of a report: per-iteration time (iteration and traversal
/// seconds where recorded, else the first value column) and one speedup bar
/// chart per speedup column's metric.
pub fn plots_for(report: &Report, series: &[IterationPoint]) -> Result<Vec<Plot>, PlotError> {
    let mut out = Vec::new();
    let present = |m: &str| series.iter().any(|p| p.name == m);
    let mut time_metrics: Vec<&str> = ["time/iteration_seconds", "time/traversal_seconds"]
        .into_iter()
        .filter(|m| present(m))
        .collect();
    if time_metrics.is_empty() {
        if let Some(c) = report
            .columns
            .iter()
            .find(|c| c.kind == ColumnKind::Value && present(&c.metric))
        {
            time_metrics.push(&c.metric);
        }
    }
    for metric in time_metrics {
        let mut lines: Vec<(String, Vec<(i64, f64)>)> = Vec::new();
        for p in series.iter().filter(|p| p.name == metric) {
            match lines.iter_mut().find(|(a, _)| *a == p.arm) {
                Some((_, pts)) => pts.push((p.iteration, p.mean)),
                None => lines.push((p.arm.clone(), vec![(p.iteration, p.mean)])),
            }
        }
        let title = format!("{metric} per iteration");
        let svg = iteration_plot(&title, metric, report.experiment.warmup, &lines)?;
        out.push((title, format!("{}-per-iteration", slugify(metric)), svg));
    }
    let mut speedup_metrics: Vec<&str> = Vec::new();
    for c in report
        .columns
        .iter()
        .filter(|c| c.kind == ColumnKind::Speedup)
    {
        if !speedup_metrics.contains(&c.metric.as_str()) {
            speedup_metrics.push(&c.metric);
        }
    }
    for metric in speedup_metrics {
        let bars: Vec<(String, super::stats::Speedup)> = report
            .arms
            .iter()
            .filter(|a| !a.is_baseline)
            .filter_map(|a| {
                let s = a.metric(metric)?.comparison?.speedup?;
                Some((a.name.clone(), s))
            })
            .collect();
        if bars.is_empty() {
            continue;
        }
        let gate = report
            .gate
            .as_ref()
            .filter(|g| g.metric == metric)
            .map(|g| g.min_speedup);
        let title = format!("{metric} speedup vs {}", report.baseline);
        let svg = speedup_plot(&title, &bars, gate)?;
        out.push((title, format!("{}-speedup", slugify(metric)), svg));
    }
    Ok(out)
}

fn create_new(path: &Path, text: &str) -> Result<bool, ArchiveError> {
    match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(mut f) => {
            f.write_all(text.as_bytes())
                .map_err(|source| ArchiveError::Write {
                    path: path.to_path_buf(),
                    source,
                })?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(ArchiveError::Write {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes the report and its plots into `dir` (created if missing) under
/// the first free stem `YYYY-MM-DD-<slug>[-N]`, linking the plots from the
/// markdown. Nothing that exists is overwritten.
pub fn write(dir: &Path, report: &Report, plots: &[Plot]) -> Result<Archived, ArchiveError> {
    std::fs::create_dir_all(dir).map_err(|source| ArchiveError::Dir {
        path: dir.to_path_buf(),
        source,
    })?;
    let base = format!(
        "{}-{}",
        report.experiment.date,
        slugify(&report.experiment.name)
    );
    // The date and name come from the database; whatever they hold, the
    // files land in `dir` or nowhere.
    let plain = !base.is_empty()
        && !base.starts_with('.')
        && base
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !plain {
        return Err(ArchiveError::BadName(base));
    }
    for k in 1..10_000u32 {
        let stem = if k == 1 {
            base.clone()
        } else {
            format!("{base}-{k}")
        };
        let md = dir.join(format!("{stem}.md"));
        let svg_paths: Vec<PathBuf> = plots
            .iter()
            .map(|(_, suffix, _)| dir.join(format!("{stem}-{suffix}.svg")))
            .collect();
        if md.exists() || svg_paths.iter().any(|p| p.exists()) {
            continue;
        }
        let mut linked = report.clone();
        linked.plots = plots
            .iter()
            .zip(&svg_paths)
            .map(|((title, _, _), p)| {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (title.clone(), name)
            })
            .collect();
        let mut text = render_markdown(&linked);
        text.push('\n');
        // create_new reserves the name even against a concurrent archiver.
        if !create_new(&md, &text)? {
            continue;
        }
        let mut written = Vec::new();
        for ((_, _, svg), path) in plots.iter().zip(&svg_paths) {
            if !create_new(path, svg)? {
                return Err(ArchiveError::Write {
                    path: path.clone(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "appeared while archiving",
                    ),
                });
            }
            written.push(path.clone());
        }
        return Ok(Archived {
            markdown: md,
            plots: written,
            text,
        });
    }
    Err(ArchiveError::NoName {
        path: dir.join(format!("{base}.md")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(
            slugify("option-b-interleaved-traversal"),
            "option-b-interleaved-traversal"
        );
        assert_eq!(slugify("  AMP vs FP32 (trainer)!"), "amp-vs-fp32-trainer");
        assert_eq!(slugify("///"), "experiment");
        assert_eq!(slugify(&"x".repeat(100)).len(), 60);
    }
}
