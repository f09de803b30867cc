//! `lcx report --archive`: writes `<dir>/YYYY-MM-DD-<slug>.md` with its SVG
//! plots beside it, never overwriting anything (a taken name gets `-2`,
//! `-3`, …), and records each file in the `reports` table ([`archive`]).
//! Which plots a report gets is decided here ([`plots_for`]); drawing them
//! is `plots.rs`'s.

use std::path::{Path, PathBuf};

use crate::store::report_read::IterationPoint;
use crate::store::Store;

use super::model::{ColumnKind, Report};
use crate::metrics::{ITERATION_SECONDS, TRAVERSAL_SECONDS};

use super::plots::{batch_plot, elapsed_plot, iteration_plot, speedup_plot, Bar, Line, PlotError};
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
    #[error("recording the archive in the database")]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Output(#[from] crate::files::OutputError),
}

impl ArchiveError {
    /// The user named a folder lcx must not write into (exit 2).
    pub fn is_user_input(&self) -> bool {
        matches!(self, ArchiveError::Output(e) if e.is_user_input())
    }
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

/// The metrics [`plots_for`] draws from, to fetch per cell: the iteration
/// and traversal times, the gate's metric, every value column and, for a
/// batch-size sweep, `batch_size`.
pub fn plot_metrics(report: &Report) -> Vec<String> {
    let values = report
        .columns
        .iter()
        .filter(|c| c.kind == ColumnKind::Value)
        .map(|c| c.metric.as_str());
    unique(
        [ITERATION_SECONDS, TRAVERSAL_SECONDS]
            .into_iter()
            .chain(report.gate.iter().map(|g| g.metric.as_str()))
            .chain(report.guards.iter().map(|g| g.metric.as_str()))
            .chain(values)
            .chain([BATCH_SIZE]),
    )
    .into_iter()
    .map(str::to_string)
    .collect()
}

const BATCH_SIZE: &str = "batch_size";

/// `items` without repeats, in first-seen order.
fn unique<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// The distinct `batch_size`s of `arm`'s lines, sorted.
fn batch_sizes(series: &[IterationPoint], arm: &str) -> Vec<f64> {
    let mut own: Vec<f64> = series
        .iter()
        .filter(|p| p.arm == arm && p.name == BATCH_SIZE)
        .map(|p| p.value)
        .collect();
    own.sort_by(f64::total_cmp);
    own.dedup();
    own
}

/// `metric`'s lines: per arm (plan order), each cell's points and their
/// mean at each iteration.
fn lines_of(report: &Report, series: &[IterationPoint], metric: &str) -> Vec<Line> {
    let mut lines = Vec::new();
    for (color, arm) in report.arms.iter().enumerate() {
        let mut repeats: Vec<(i64, Vec<(f64, f64)>)> = Vec::new();
        for p in series
            .iter()
            .filter(|p| p.arm == arm.name && p.name == metric)
        {
            match repeats.iter_mut().find(|(run, _)| *run == p.run_id) {
                Some((_, pts)) => pts.push((p.iteration as f64, p.value)),
                None => repeats.push((p.run_id, vec![(p.iteration as f64, p.value)])),
            }
        }
        if repeats.is_empty() {
            continue;
        }
        let mut at: std::collections::BTreeMap<i64, (f64, usize)> = Default::default();
        for (x, y) in repeats.iter().flat_map(|(_, r)| r.iter()) {
            if y.is_finite() {
                let e = at.entry(*x as i64).or_insert((0.0, 0));
                e.0 += y;
                e.1 += 1;
            }
        }
        lines.push(Line {
            arm: arm.name.clone(),
            color,
            mean: at
                .into_iter()
                .map(|(x, (sum, n))| (x as f64, sum / n as f64))
                .collect(),
            repeats: repeats.into_iter().map(|(_, r)| r).collect(),
        });
    }
    lines
}

/// `metric`'s lines against elapsed time: per arm, each cell's points at
/// the sum of its iteration times up to and including the point's
/// iteration, and their mean (of times and of values) per iteration.
fn elapsed_lines(report: &Report, series: &[IterationPoint], metric: &str) -> Vec<Line> {
    // Each cell's running total of iteration seconds, by iteration, summed
    // once for all of its points.
    let mut elapsed: std::collections::BTreeMap<i64, Vec<(i64, f64)>> = Default::default();
    for p in series.iter().filter(|p| p.name == ITERATION_SECONDS) {
        elapsed
            .entry(p.run_id)
            .or_default()
            .push((p.iteration, p.value));
    }
    for seconds in elapsed.values_mut() {
        seconds.sort_by_key(|(i, _)| *i);
        let mut total = 0.0;
        for (_, s) in seconds.iter_mut() {
            total += *s;
            *s = total;
        }
    }
    let mut out = Vec::new();
    for (color, arm) in report.arms.iter().enumerate() {
        let mut repeats: Vec<(i64, Vec<(f64, f64)>)> = Vec::new();
        let mut at: std::collections::BTreeMap<i64, (f64, f64, usize)> = Default::default();
        for p in series
            .iter()
            .filter(|p| p.arm == arm.name && p.name == metric)
        {
            let Some(cumulative) = elapsed.get(&p.run_id) else {
                continue;
            };
            let Ok(k) = cumulative.binary_search_by_key(&p.iteration, |(i, _)| *i) else {
                continue;
            };
            let t = cumulative[k].1;
            match repeats.iter_mut().find(|(run, _)| *run == p.run_id) {
                Some((_, pts)) => pts.push((t, p.value)),
                None => repeats.push((p.run_id, vec![(t, p.value)])),
            }
            let e = at.entry(p.iteration).or_insert((0.0, 0.0, 0));
            e.0 += t;
            e.1 += p.value;
            e.2 += 1;
        }
        if repeats.is_empty() {
            continue;
        }
        out.push(Line {
            arm: arm.name.clone(),
            color,
            mean: at
                .into_values()
                .map(|(t, v, n)| (t / n as f64, v / n as f64))
                .collect(),
            repeats: repeats.into_iter().map(|(_, r)| r).collect(),
        });
    }
    out
}

/// The batch-size sweep of a `bench-forward` experiment: each arm's
/// batch size (from its lines) against its warm-up-excluded mean of
/// `metric`. Arms sharing a batch size go to separate lines, in plan order.
fn batch_lines(report: &Report, series: &[IterationPoint], metric: &str) -> Vec<Line> {
    let mut lines: Vec<Line> = Vec::new();
    let mut seen: Vec<(f64, usize)> = Vec::new();
    for arm in &report.arms {
        let (Some(&batch), Some(mean)) = (
            batch_sizes(series, &arm.name).first(),
            arm.metric(metric)
                .and_then(|m| m.summary.as_ref())
                .map(|s| s.mean),
        ) else {
            continue;
        };
        let k = match seen.iter_mut().find(|(b, _)| *b == batch) {
            Some((_, k)) => {
                *k += 1;
                *k
            }
            None => {
                seen.push((batch, 0));
                0
            }
        };
        if lines.len() <= k {
            lines.push(Line {
                arm: if k == 0 {
                    report.experiment.name.clone()
                } else {
                    format!("{} ({})", report.experiment.name, k + 1)
                },
                color: k,
                mean: Vec::new(),
                repeats: Vec::new(),
            });
        }
        lines[k].mean.push((batch, mean));
    }
    lines
}

/// A batch-size sweep: every arm with lines ran one batch size (its lines
/// carry one `batch_size`), and the arms ran at least two between them. An
/// A/B of arms that each sweep every size is not one.
fn is_batch_sweep(report: &Report, series: &[IterationPoint]) -> bool {
    let mut sizes: Vec<f64> = Vec::new();
    for arm in &report.arms {
        match batch_sizes(series, &arm.name).as_slice() {
            [] => {}
            [one] => sizes.push(*one),
            _ => return false,
        }
    }
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    sizes.len() > 1
}

/// The plots of a report:
/// - a `[sweep]`: its own ([`super::sweep_render::sweep_plots`]), and nothing else;
/// - a batch-size sweep (arms whose lines carry different `batch_size`s): each value
///   column's metric against batch size, log–log, and nothing else;
/// - otherwise, per iteration: the iteration and traversal times where
///   recorded and the gate's metric (else the first value column), and one
///   speedup bar chart per speedup column's metric and for the gate's.
pub fn plots_for(report: &Report, series: &[IterationPoint]) -> Result<Vec<Plot>, PlotError> {
    if let Some(sweep) = &report.sweep {
        let plots = super::sweep_render::sweep_plots(sweep, report.rule.min_effect)?;
        let metric = slugify(&sweep.metric);
        let axis = sweep
            .along_axis()
            .map_or_else(|| "axis".to_string(), |(_, a)| slugify(&a.short));
        return Ok(plots
            .into_iter()
            .map(|(title, kind, svg)| {
                let suffix = match kind {
                    "value" => format!("{metric}-by-{axis}"),
                    kind => format!("{metric}-{kind}-by-{axis}"),
                };
                (title, suffix, svg)
            })
            .collect());
    }
    let mut out = Vec::new();
    let present = |m: &str| series.iter().any(|p| p.name == m);
    let values: Vec<&str> = unique(
        report
            .columns
            .iter()
            .filter(|c| c.kind == ColumnKind::Value && present(&c.metric))
            .map(|c| c.metric.as_str()),
    );
    if is_batch_sweep(report, series) {
        for metric in values {
            let lines = batch_lines(report, series, metric);
            if lines.iter().all(|l| l.mean.len() < 2) {
                continue;
            }
            let title = format!("{metric} by batch size");
            let unit = crate::metrics::lookup(metric).map_or("value", |i| i.unit);
            let svg = batch_plot(&title, &format!("{metric} ({unit})"), &lines)?;
            out.push((title, format!("{}-by-batch-size", slugify(metric)), svg));
        }
        return Ok(out);
    }
    let gate_metric = report.gate.as_ref().map(|g| g.metric.as_str());
    let guarded: Vec<&str> = unique(
        report
            .guards
            .iter()
            .map(|g| g.metric.as_str())
            .filter(|m| present(m)),
    );
    let mut per_iteration: Vec<&str> = unique(
        [ITERATION_SECONDS, TRAVERSAL_SECONDS]
            .into_iter()
            .chain(gate_metric)
            .chain(guarded.iter().copied())
            .filter(|m| present(m)),
    );
    if per_iteration.is_empty() {
        per_iteration.extend(values.first());
    }
    for metric in per_iteration {
        let lines = lines_of(report, series, metric);
        let title = format!("{metric} per iteration");
        let svg = iteration_plot(
            &title,
            &crate::metrics::with_unit(metric, metric),
            report.experiment.warmup,
            &lines,
        )?;
        out.push((title, format!("{}-per-iteration", slugify(metric)), svg));
    }
    // What a guard protects (learning), against the time it took: learning
    // per second beside learning per iteration.
    if present(ITERATION_SECONDS) {
        for metric in guarded {
            let lines = elapsed_lines(report, series, metric);
            let title = format!("{metric} by training time");
            let svg = elapsed_plot(&title, &crate::metrics::with_unit(metric, metric), &lines)?;
            out.push((title, format!("{}-by-training-time", slugify(metric)), svg));
        }
    }
    let speedup_metrics = unique(
        report
            .columns
            .iter()
            .filter(|c| c.kind == ColumnKind::Speedup)
            .map(|c| c.metric.as_str())
            .chain(gate_metric),
    );
    for metric in speedup_metrics {
        let bars: Vec<Bar> = report
            .arms
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.is_baseline)
            .filter_map(|(i, a)| {
                let s = a.metric(metric)?.comparison?.speedup?;
                Some((a.name.clone(), i, s))
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

/// Writes `text` as a new file at `path`, whole (a temporary file renamed
/// in without replacing anything); `false` where something is there.
fn create_new(path: &Path, text: &str, databases: &[&Path]) -> Result<bool, ArchiveError> {
    Ok(crate::files::write_new(
        "--archive-dir",
        path,
        text.as_bytes(),
        databases,
    )?)
}

/// Writes the report and its plots into `dir` (created if missing) under
/// the first free stem `YYYY-MM-DD-<slug>[-N]`, linking the plots from the
/// markdown. Nothing that exists is overwritten, each file is written whole
/// or not at all, and none lands on one of `databases`.
pub fn write(
    dir: &Path,
    report: &Report,
    plots: &[Plot],
    databases: &[&Path],
) -> Result<Archived, ArchiveError> {
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
        if !create_new(&md, &text, databases)? {
            continue;
        }
        let mut written = Vec::new();
        for ((_, _, svg), path) in plots.iter().zip(&svg_paths) {
            if !create_new(path, svg, databases)? {
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

/// `lcx report --archive` for one report: reads its cells' series from
/// `store`, draws the plots, writes the files into `dir` (see [`write`])
/// and records each file, with its sha256, in the `reports` table.
pub fn archive(store: &mut Store, dir: &Path, report: &Report) -> Result<Archived, ArchiveError> {
    let id = report.experiment.id;
    let counted = super::builder::counted_runs(&store.runs(id)?);
    let series = store.iteration_series(id, &counted, &plot_metrics(report))?;
    let plots = plots_for(report, &series)?;
    let db = store.path().map(Path::to_path_buf);
    let databases: Vec<&Path> = db.iter().map(PathBuf::as_path).collect();
    let written = write(dir, report, &plots, &databases)?;
    let hash = |text: &str| crate::experiment::plan::sha256_hex(text.as_bytes());
    store.insert_report(
        Some(id),
        &written.markdown.to_string_lossy(),
        &hash(&written.text),
        "markdown",
    )?;
    // The files hold exactly these texts: they were created new.
    for (path, (_, _, svg)) in written.plots.iter().zip(&plots) {
        store.insert_report(Some(id), &path.to_string_lossy(), &hash(svg), "svg")?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::plan::{self, Overrides, Requirement};
    use crate::store::{LineProblems, RunOutcome, RunStatus, Store};

    /// Renders `svg` to a PNG with the system's fonts and returns the text
    /// the picture shows, after checking that every text lies inside the
    /// canvas and that something was drawn.
    /// With `LCX_PLOT_PNG_DIR` set, the PNG is written there as `name.png`
    /// (to look at the plots without a browser).
    fn render(
        svg: &str,
        fonts: &std::sync::Arc<resvg::usvg::fontdb::Database>,
        name: &str,
    ) -> Vec<String> {
        use resvg::usvg;
        let options = usvg::Options {
            fontdb: fonts.clone(),
            ..Default::default()
        };
        let tree = usvg::Tree::from_str(svg, &options).expect("plotters writes valid SVG");
        let (w, h) = (tree.size().width(), tree.size().height());
        assert_eq!(
            (w, h),
            (
                super::super::plots::WIDTH as f32,
                super::super::plots::HEIGHT as f32
            )
        );
        let mut texts = Vec::new();
        fn walk(g: &usvg::Group, w: f32, h: f32, texts: &mut Vec<String>) {
            for node in g.children() {
                match node {
                    usvg::Node::Group(g) => walk(g, w, h, texts),
                    usvg::Node::Text(t) => {
                        let text: String = t.chunks().iter().map(|c| c.text()).collect();
                        let b = t.abs_bounding_box();
                        // Half a pixel of anti-aliasing either side.
                        let inside = b.left() >= -0.5
                            && b.top() >= -0.5
                            && b.right() <= w + 0.5
                            && b.bottom() <= h + 0.5;
                        assert!(inside, "text `{text}` at {b:?} leaves the {w}×{h} canvas");
                        assert!(
                            !t.flattened().children().is_empty() || text.trim().is_empty(),
                            "text `{text}` was not laid out (no font?)"
                        );
                        texts.push(text.trim().to_string());
                    }
                    _ => {}
                }
            }
        }
        walk(tree.root(), w, h, &mut texts);
        let mut pixmap = resvg::tiny_skia::Pixmap::new(w as u32, h as u32).unwrap();
        resvg::render(
            &tree,
            resvg::tiny_skia::Transform::default(),
            &mut pixmap.as_mut(),
        );
        let inked = pixmap.pixels().iter().filter(|p| p.red() < 128).count();
        assert!(inked > 2_000, "a plot draws more than {inked} dark pixels");
        let png = pixmap.encode_png().unwrap();
        assert!(png.len() > 1_000);
        if let Some(dir) = std::env::var_os("LCX_PLOT_PNG_DIR") {
            std::fs::write(std::path::Path::new(&dir).join(format!("{name}.png")), png).unwrap();
        }
        texts
    }

    /// A store holding `file`'s experiment with made-up values: every
    /// metric a plot may draw, for each runnable arm, cells completed.
    fn seeded(path: &std::path::Path) -> (Store, i64, plan::Plan) {
        let (mut plan, mut text) = plan::load(path, &Overrides::default()).unwrap();
        if plan.iterations > 300 {
            // report-scale's million iterations time `lcx report`, not plots.
            let fewer = Overrides {
                iterations: Some(300),
                ..Default::default()
            };
            (plan, text) = plan::load(path, &fewer).unwrap();
        }
        let mut store = Store::open_in_memory().unwrap();
        let id = crate::experiment::run::create_experiment(
            &mut store,
            &plan,
            &text,
            vec![],
            (Some("abc".into()), Some(false)),
            Default::default(),
        )
        .unwrap();
        let mut metrics: Vec<String> = vec![ITERATION_SECONDS.into(), TRAVERSAL_SECONDS.into()];
        metrics.extend(plan.columns.iter().map(|c| c.metric.clone()));
        metrics.extend(plan.gate.iter().map(|g| g.metric.clone()));
        metrics.extend(plan.guards.iter().map(|g| g.metric.clone()));
        for run in store.runs(id).unwrap() {
            let arm = plan.arms.iter().find(|a| a.name == run.arm).unwrap();
            if arm.requires == Some(Requirement::Cuda) {
                store.skip_run(run.id, "requires cuda").unwrap();
                continue;
            }
            let k = run.arm_index as f64 + 1.0;
            let batch = arm
                .args
                .windows(2)
                .find(|w| w[0] == "--batch-sizes")
                .and_then(|w| w[1].parse::<f64>().ok());
            let attempt = store.start_run(run.id).unwrap();
            for it in 1..=i64::from(plan.iterations) {
                let wobble = 1.0 + 0.05 * ((it * 7 + run.repeat * 3) % 5) as f64;
                let mut numbers: std::collections::BTreeMap<String, f64> =
                    metrics.iter().map(|m| (m.clone(), k * wobble)).collect();
                if let Some(b) = batch {
                    numbers.insert(BATCH_SIZE.into(), b);
                }
                let numbers: Vec<(String, f64)> = numbers.into_iter().collect();
                store
                    .insert_line(run.id, attempt, it, &numbers, &[])
                    .unwrap();
            }
            let outcome = RunOutcome {
                status: RunStatus::Completed,
                exit_code: Some(0),
                signal: None,
                error: None,
                stderr_tail: None,
                wall_seconds: 1.0,
                db_wait_seconds: None,
                problems: LineProblems::default(),
            };
            store.finish_run(run.id, &outcome).unwrap();
        }
        (store, id, plan)
    }

    /// A sweep is arms at one batch size each; arms that each sweep every
    /// size are an A/B and get the per-iteration and speedup plots.
    #[test]
    fn only_arms_at_one_batch_size_each_make_a_sweep() {
        let report = crate::report::fixture::report(1.5, true);
        let point = |arm: &str, run_id, value| IterationPoint {
            arm: arm.into(),
            run_id,
            repeat: 1,
            name: BATCH_SIZE.into(),
            iteration: 1,
            value,
        };
        let (a, b) = (report.arms[0].name.clone(), report.arms[1].name.clone());
        assert!(is_batch_sweep(
            &report,
            &[point(&a, 1, 1.0), point(&b, 2, 64.0)]
        ));
        assert!(
            !is_batch_sweep(&report, &[point(&a, 1, 64.0), point(&b, 2, 64.0)]),
            "one size"
        );
        let both_sweep = [
            point(&a, 1, 1.0),
            point(&a, 1, 64.0),
            point(&b, 2, 1.0),
            point(&b, 2, 64.0),
        ];
        assert!(
            !is_batch_sweep(&report, &both_sweep),
            "an A/B of two sweeps"
        );
    }

    /// Whether sweep arm `arm` has cells with data in [`seeded`]'s store: an
    /// arm that needs CUDA was skipped there.
    fn ran_here(plan: &plan::Plan, arm: &str) -> bool {
        plan.arms.iter().any(|a| {
            a.requires != Some(Requirement::Cuda)
                && (a.name == arm || a.name.starts_with(&format!("{arm}-")))
        })
    }

    /// #19: every plot of every seed experiment, rendered to PNG as a
    /// reader would see it: titles, axes with units, each arm named, the
    /// interval labelled, and no text off the canvas.
    #[test]
    fn every_seed_experiment_plot_renders_with_its_labels_inside_the_canvas() {
        let mut db = resvg::usvg::fontdb::Database::new();
        db.load_system_fonts();
        assert!(
            !db.is_empty(),
            "no system fonts to render plots with: install fonts-dejavu-core"
        );
        // Plots ask for `sans-serif`, which fontdb maps to Arial unless told:
        // any installed sans face will do (DejaVu Sans on Debian).
        let sans = db
            .faces()
            .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
            .find(|name| name.contains("Sans") && !name.contains("Mono"));
        if let Some(sans) = sans {
            db.set_sans_serif_family(sans);
        }
        let fonts = std::sync::Arc::new(db);
        // The repository root's experiments/, two folders above this crate.
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments"));
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        assert!(files.len() >= 10, "{files:?}");
        // A `[matrix]` of batch sizes, as forward-batch.toml was before it
        // became a sweep: its log–log plot is what users' matrices get.
        let matrix = tempfile::tempdir().unwrap();
        let batch = matrix.path().join("batch-matrix.toml");
        std::fs::write(
            &batch,
            format!(
                "name = \"batch-matrix\"\nworkload = \"bench-forward\"\nconfig = \"{}/configs/default.toml\"\n\
                 iterations = 30\nwarmup = 5\n[matrix]\n\"--batch-sizes\" = [1, 16, 256]\n\
                 [[columns]]\nmetric = \"bench/us_per_state\"\nlabel = \"us/state\"\n",
                dir.parent().unwrap().display()
            ),
        )
        .unwrap();
        files.push(batch);
        let mut kinds = std::collections::BTreeSet::new();
        for file in &files {
            let (store, id, plan) = seeded(file);
            let report = crate::report::builder::load(&store, id, Default::default()).unwrap();
            let counted = crate::report::builder::counted_runs(&store.runs(id).unwrap());
            let series = store
                .iteration_series(id, &counted, &plot_metrics(&report))
                .unwrap();
            let plots = plots_for(&report, &series).unwrap();
            // Every arm of a CUDA-only file was skipped here: nothing to draw.
            let cuda_only = plan
                .arms
                .iter()
                .all(|a| a.requires == Some(Requirement::Cuda));
            assert_eq!(plots.is_empty(), cuda_only, "{}: plots", file.display());
            for (title, suffix, svg) in &plots {
                let at = format!("{} / {suffix}", file.display());
                let stem = file.file_stem().unwrap_or_default().to_string_lossy();
                let texts = render(svg, &fonts, &format!("{stem}-{suffix}"));
                assert!(
                    texts.iter().any(|t| t == title),
                    "{at}: title missing: {texts:?}"
                );
                let shown = |s: &str| texts.iter().any(|t| t.contains(s));
                if suffix.ends_with("-speedup") {
                    kinds.insert("speedup");
                    assert!(
                        shown("95 % CI") && shown("speedup vs baseline (×)"),
                        "{at}: {texts:?}"
                    );
                    for arm in report
                        .arms
                        .iter()
                        .filter(|a| !a.is_baseline && a.completed > 0)
                    {
                        assert!(
                            texts.contains(&arm.name),
                            "{at}: bar `{}` unnamed: {texts:?}",
                            arm.name
                        );
                    }
                    if let Some(g) = plan
                        .gate
                        .as_ref()
                        .filter(|g| suffix.starts_with(&slugify(&g.metric)))
                    {
                        assert!(
                            shown(&format!("gate {:.2}×", g.min_speedup)),
                            "{at}: {texts:?}"
                        );
                    }
                } else if let Some(sweep) = &report.sweep {
                    kinds.insert("sweep");
                    let (_, axis) = sweep.along_axis().unwrap();
                    let log_x = format!("{} (log scale)", axis.short);
                    assert!(
                        texts.contains(&axis.short) || texts.contains(&log_x),
                        "{at}: no axis: {texts:?}"
                    );
                    for v in &axis.values {
                        assert!(texts.contains(v), "{at}: point {v} unnamed: {texts:?}");
                    }
                    if suffix.contains("-speedup-by-") {
                        assert!(
                            shown("no change (") && shown("1× (baseline)"),
                            "{at}: {texts:?}"
                        );
                    }
                    for arm in &sweep.arms {
                        let drawn = ran_here(&plan, arm)
                            && (!suffix.contains("-speedup-by-") || *arm != sweep.baseline);
                        assert!(!drawn || shown(arm), "{at}: `{arm}` unnamed: {texts:?}");
                    }
                } else if suffix.ends_with("-by-batch-size") {
                    kinds.insert("batch");
                    assert!(shown("batch size (log scale)"), "{at}: {texts:?}");
                } else {
                    kinds.insert("iteration");
                    assert!(shown("iteration"), "{at}: {texts:?}");
                    // The y axis names the metric with its unit.
                    let metric = title.trim_end_matches(" per iteration");
                    let unit = crate::metrics::lookup(metric).map(|i| i.unit);
                    if let Some(u) = unit.filter(|u| *u != "1") {
                        assert!(shown(&format!("{metric} ({u})")), "{at}: {texts:?}");
                    }
                    for arm in report.arms.iter().filter(|a| a.completed > 0) {
                        assert!(
                            shown(&arm.name),
                            "{at}: no legend for `{}`: {texts:?}",
                            arm.name
                        );
                    }
                    if plan.repeats > 1 {
                        assert!(shown("repeats; faint: each"), "{at}: {texts:?}");
                    }
                }
            }
            if let Some(g) = &plan.gate {
                let slug = slugify(&g.metric);
                assert!(
                    plots.iter().any(|(_, s, _)| s.starts_with(&slug)),
                    "{}: no plot of the gate's metric {}",
                    file.display(),
                    g.metric
                );
            }
        }
        assert_eq!(kinds.len(), 4, "each kind of plot was drawn: {kinds:?}");
    }

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
