//! `lcx publish DIR`: the database as a static site, in the manner of
//! asv's `publish`: an index of every experiment, a page per experiment
//! (its report, plots, the file as run, its diff against the previous run
//! of its name) and a page per (name, arm, metric) with its history and
//! change points. Every link is relative and every script and style is in
//! `DIR`, so the folder opens from the file system, any static host or a
//! CI artifact, and asks the network for nothing.
//!
//! Incremental: `DIR/.lcx-site.json` keeps each page's signature (what
//! its content depends on: the experiment's row and cells, its neighbours,
//! the lcx version); a page whose signature did not change is neither
//! rebuilt nor rewritten, and pages of removed experiments are deleted.
//! The pages are pure functions (`pages.rs`, `chart.rs`, `html.rs`); this
//! file reads the store and writes the files.

mod assets;
mod chart;
#[cfg(test)]
mod hostile;
mod html;
mod pages;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use pages::IndexRow;

use crate::report::archive::{plot_metrics, plots_for};
use crate::report::builder::{self, counted_runs, stored_plan};
use crate::report::compare::{compare_reports, render_compare};
use crate::report::history::{self, render_history};
use crate::report::model::Report;
use crate::report::plots::PlotError;
use crate::report::render::render_markdown;
use crate::report::stats::VerdictRule;
use crate::store::{Experiment, Run, Store, StoreError};

/// The manifest's name in the site's folder; its presence marks the
/// folder as a site lcx may rewrite.
pub const MANIFEST: &str = ".lcx-site.json";
/// Bumped when pages change shape, so an older site is rebuilt whole.
const SITE_FORMAT: u32 = 2;

/// Why a site could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(
        "{} is not empty and holds no lcx site ({MANIFEST}); publish into a new or empty \
         folder, or one an earlier `lcx publish` wrote",
        .0.display()
    )]
    NotASite(PathBuf),
    #[error("lcx publish {}: is a file; expected the site's folder", .0.display())]
    NotAFolder(PathBuf),
    #[error("writing {}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Plot(#[from] PlotError),
    #[error(transparent)]
    Output(#[from] crate::files::OutputError),
}

impl PublishError {
    /// The user named a folder lcx must not write into (exit 2).
    pub fn is_user_input(&self) -> bool {
        match self {
            PublishError::NotASite(_) | PublishError::NotAFolder(_) => true,
            PublishError::Output(e) => e.is_user_input(),
            _ => false,
        }
    }
}

/// What a publish did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Published {
    pub experiments: usize,
    pub histories: usize,
    /// Files written (new or changed).
    pub written: usize,
    /// Pages whose signature had not changed: not rebuilt.
    pub kept: usize,
    /// Files of pages that no longer exist, deleted.
    pub removed: usize,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    format: u32,
    lcx: String,
    /// Experiment id → its page's signature, index row and files.
    experiments: BTreeMap<i64, Entry>,
    /// History page → its signature.
    histories: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    signature: String,
    row: IndexRow,
    files: Vec<String>,
}

impl Manifest {
    /// The folder's manifest; an empty one (everything rebuilt) when it is
    /// missing, unreadable or of another format or lcx version.
    fn read(dir: &Path) -> Manifest {
        std::fs::read_to_string(dir.join(MANIFEST))
            .ok()
            .and_then(|t| serde_json::from_str::<Manifest>(&t).ok())
            .filter(|m| m.format == SITE_FORMAT && m.lcx == env!("CARGO_PKG_VERSION"))
            .unwrap_or_default()
    }
}

/// Writes files, leaving one whose content is already what it would be.
struct Writer<'a> {
    dir: &'a Path,
    /// The database the site is read from: no page is written over it.
    databases: Vec<PathBuf>,
    written: usize,
}

impl Writer<'_> {
    fn put(&mut self, rel: &str, text: &str) -> Result<(), PublishError> {
        let path = self.dir.join(rel);
        if std::fs::read(&path).is_ok_and(|old| old == text.as_bytes()) {
            return Ok(());
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| PublishError::Io {
                path: path.clone(),
                source,
            })?;
        }
        // A reader (a browser, a web server) never sees half a page, and a
        // link or database planted at a page's name is not written through.
        let databases: Vec<&Path> = self.databases.iter().map(PathBuf::as_path).collect();
        crate::files::replace("lcx publish", &path, text.as_bytes(), &databases)?;
        self.written += 1;
        Ok(())
    }
}

/// Whether `rel`, a file a site's manifest lists, is one a publish writes
/// (under `e/` or `h/` of the site's folder): only such a file is deleted
/// when its page goes, whatever an edited manifest says.
fn is_page_file(rel: &str) -> bool {
    let path = Path::new(rel);
    crate::files::is_inside(path)
        && path.components().count() == 2
        && (rel.starts_with("e/") || rel.starts_with("h/"))
}

/// Writes the site of every experiment in `store` into `dir` (created if
/// missing). `dir` must be new, empty, or a site an earlier publish wrote.
pub fn publish(store: &Store, dir: &Path) -> Result<Published, PublishError> {
    let existed = dir.exists();
    open_folder(dir)?;
    let fresh = !dir.join(MANIFEST).exists();
    let result = publish_into(store, dir);
    // A first publish that failed takes what it wrote with it: a folder
    // left with files and no manifest would be refused by the next try.
    if result.is_err() && fresh {
        if existed {
            if let Ok(entries) = std::fs::read_dir(dir) {
                for entry in entries.flatten() {
                    let path = entry.path();
                    let _ = if path.is_dir() {
                        std::fs::remove_dir_all(path)
                    } else {
                        std::fs::remove_file(path)
                    };
                }
            }
        } else {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    result
}

/// [`publish`] into a folder opened for it.
fn publish_into(store: &Store, dir: &Path) -> Result<Published, PublishError> {
    let mut site = Site {
        store,
        dir,
        out: Writer {
            dir,
            databases: store.path().map(Path::to_path_buf).into_iter().collect(),
            written: 0,
        },
        old: Manifest::read(dir),
        new: Manifest {
            format: SITE_FORMAT,
            lcx: env!("CARGO_PKG_VERSION").to_string(),
            ..Manifest::default()
        },
        done: Published::default(),
        rule: VerdictRule {
            alpha: 0.05,
            min_effect: 0.05,
        },
    };
    site.out.put("assets/site.css", assets::CSS)?;
    site.out.put("assets/site.js", assets::JS)?;

    let mut experiments = store.experiments(None)?;
    experiments.reverse(); // oldest first: a page's previous run is built before it
    let mut by_name: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for e in &experiments {
        by_name.entry(e.name.clone()).or_default().push(e.id);
    }
    site.experiment_pages(&experiments, &by_name)?;
    site.done.experiments = site.new.experiments.len();
    site.history_pages(&experiments, &by_name)?;
    site.finish()
}

/// Makes `dir` if missing; refuses a folder with files that holds no
/// site lcx wrote.
fn open_folder(dir: &Path) -> Result<(), PublishError> {
    let io = |source| PublishError::Io {
        path: dir.to_path_buf(),
        source,
    };
    if dir.exists() && !dir.is_dir() {
        return Err(PublishError::NotAFolder(dir.to_path_buf()));
    }
    if dir.exists() && !dir.join(MANIFEST).exists() {
        let mut entries = std::fs::read_dir(dir).map_err(io)?;
        if entries.next().is_some() {
            return Err(PublishError::NotASite(dir.to_path_buf()));
        }
    }
    std::fs::create_dir_all(dir).map_err(io)
}

/// One publish under way: the store it reads, the files it writes, the
/// manifest it found and the one it is making.
struct Site<'a> {
    store: &'a Store,
    dir: &'a Path,
    out: Writer<'a>,
    old: Manifest,
    new: Manifest,
    done: Published,
    /// How a page's diff against the previous run and a history judge.
    rule: VerdictRule,
}

impl Site<'_> {
    /// A page per experiment (`experiments` oldest first; `by_name`, the
    /// ids of each name in that order), rebuilt only where its signature
    /// changed.
    fn experiment_pages(
        &mut self,
        experiments: &[Experiment],
        by_name: &BTreeMap<String, Vec<i64>>,
    ) -> Result<(), PublishError> {
        let statuses: HashMap<i64, String> = self
            .store
            .experiment_list(None)?
            .into_iter()
            .map(|r| (r.id, r.status))
            .collect();
        let neighbours = |e: &Experiment| {
            let ids = &by_name[&e.name];
            let at = ids.iter().position(|i| *i == e.id).unwrap_or(0);
            (at.checked_sub(1).map(|k| ids[k]), ids.get(at + 1).copied())
        };
        // The last report built per name: the next run of it diffs against it.
        let mut last_report: HashMap<String, Report> = HashMap::new();
        for e in experiments {
            let runs = self.store.runs(e.id)?;
            let (previous, next) = neighbours(e);
            let status = statuses.get(&e.id).cloned().unwrap_or_default();
            // The previous run's own signature, not only its id: its page's
            // content (a resumed run, say) is this page's diff.
            let previous_signature = previous
                .and_then(|p| self.new.experiments.get(&p))
                .map(|p| p.signature.clone());
            let signature =
                experiment_signature(e, &status, &runs, previous, previous_signature, next);
            if let Some(entry) = self.old.experiments.get(&e.id).filter(|o| {
                o.signature == signature && o.files.iter().all(|f| self.dir.join(f).exists())
            }) {
                self.new.experiments.insert(e.id, entry.clone());
                last_report.remove(&e.name);
                self.done.kept += 1;
                continue;
            }
            let previous_report = last_report.remove(&e.name);
            let report =
                self.experiment_page(e, &runs, (previous, next), previous_report, signature)?;
            last_report.insert(e.name.clone(), report);
        }
        Ok(())
    }

    /// Builds and writes experiment `e`'s page and plots, recorded under
    /// `signature`; returns its report, which the next run of its name
    /// diffs against. `previous_report` is the last one built of the name.
    fn experiment_page(
        &mut self,
        e: &Experiment,
        runs: &[Run],
        (previous, next): (Option<i64>, Option<i64>),
        previous_report: Option<Report>,
        signature: String,
    ) -> Result<Report, PublishError> {
        let page = format!("e/{}.html", e.id);
        let report = builder::load(self.store, e.id, builder::Options::default())?;
        let series =
            self.store
                .iteration_series(e.id, &counted_runs(runs), &plot_metrics(&report))?;
        let plots = plots_for(&report, &series)?;
        let mut linked = report.clone();
        let mut files = vec![page.clone()];
        linked.plots = Vec::new();
        for (title, suffix, svg) in &plots {
            let name = format!("{}-{suffix}.svg", e.id);
            self.out.put(&format!("e/{name}"), svg)?;
            files.push(format!("e/{name}"));
            linked.plots.push((title.clone(), name));
        }
        let row = IndexRow::of(
            &report,
            history::commit_label(e),
            e.fingerprint
                .hostname
                .clone()
                .unwrap_or_else(|| "unknown host".into()),
            history::fingerprint_summary(&e.fingerprint),
        );
        let previous_report = match (previous, previous_report) {
            (Some(p), Some(r)) if r.experiment.id == p => Some(r),
            (Some(p), _) => Some(builder::load(self.store, p, builder::Options::default())?),
            (None, _) => None,
        };
        let diff_markdown = previous_report.as_ref().map(|prev| {
            let rows = compare_reports(prev, &report, self.rule);
            render_compare(
                &crate::report::prose::Prose::ours(format!("#{}", prev.experiment.id)),
                &crate::report::prose::Prose::ours(format!("#{}", e.id)),
                &rows,
                &[],
            )
        });
        let histories = history_links(&row, &e.name);
        let html = pages::experiment_page(&pages::ExperimentPage {
            row: &row,
            report_markdown: &render_markdown(&linked),
            file_path: &e.file_path,
            file_text: &e.file_text,
            previous,
            next,
            diff_markdown,
            histories,
        });
        self.out.put(&page, &html)?;
        self.new.experiments.insert(
            e.id,
            Entry {
                signature,
                row,
                files,
            },
        );
        Ok(report)
    }

    /// One history page per (name, arm, metric) that any report of the
    /// name showed: every experiment page's history links lead somewhere.
    fn history_pages(
        &mut self,
        experiments: &[Experiment],
        by_name: &BTreeMap<String, Vec<i64>>,
    ) -> Result<(), PublishError> {
        for (name, ids) in by_name {
            let name_signature: Vec<String> = ids
                .iter()
                .filter_map(|id| self.new.experiments.get(id).map(|e| e.signature.clone()))
                .collect();
            let pairs = self.shown_pairs(ids);
            let named: Vec<Experiment> = experiments
                .iter()
                .filter(|e| &e.name == name)
                .cloned()
                .collect();
            let plan = named.last().and_then(|e| stored_plan(e).ok());
            for (metric, arms) in &pairs {
                let mut moments: Option<Vec<crate::store::report_read::HistoryRun>> = None;
                for arm in arms {
                    let rel = history_path(name, arm, metric);
                    let signature = crate::experiment::plan::sha256_hex(
                        serde_json::json!([SITE_FORMAT, name_signature, arm, metric])
                            .to_string()
                            .as_bytes(),
                    );
                    self.done.histories += 1;
                    if self.old.histories.get(&rel) == Some(&signature)
                        && self.dir.join(&rel).exists()
                    {
                        self.new.histories.insert(rel, signature);
                        self.done.kept += 1;
                        continue;
                    }
                    let all = match &mut moments {
                        Some(m) => m,
                        None => {
                            let mut runs = self.store.history_runs(name, None, None)?;
                            crate::report::moments::history_moments(self.store, &mut runs, metric)?;
                            moments.insert(runs)
                        }
                    };
                    let runs: Vec<_> = all.iter().filter(|r| &r.arm == arm).cloned().collect();
                    let judged = history::judged_direction(plan.as_ref(), metric);
                    let rows = history::history_rows(&named, &runs, judged, self.rule);
                    let svg = chart::history_svg(metric, &rows, &|id| format!("../e/{id}.html"));
                    let html = pages::history_page(
                        name,
                        arm,
                        metric,
                        &svg,
                        &render_history(metric, &rows),
                    );
                    self.out.put(&rel, &html)?;
                    self.new.histories.insert(rel, signature);
                }
            }
        }
        Ok(())
    }

    /// Metric → the arms showing it, over the index rows of `ids`' pages.
    fn shown_pairs(&self, ids: &[i64]) -> BTreeMap<String, Vec<String>> {
        let mut pairs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for row in ids
            .iter()
            .filter_map(|id| self.new.experiments.get(id))
            .map(|e| &e.row)
        {
            for metric in &row.metrics {
                let arms = pairs.entry(metric.clone()).or_default();
                for arm in &row.arms {
                    if !arms.contains(arm) {
                        arms.push(arm.clone());
                    }
                }
            }
        }
        pairs
    }

    /// The index, the pages of experiments removed since (`lcx rm`) and of
    /// histories gone deleted, and the manifest last.
    fn finish(mut self) -> Result<Published, PublishError> {
        // Newest first, as `lcx list`.
        let rows: Vec<IndexRow> = self
            .new
            .experiments
            .values()
            .rev()
            .map(|e| e.row.clone())
            .collect();
        self.out.put("index.html", &pages::index_page(&rows))?;
        let keep: BTreeSet<&String> = self
            .new
            .experiments
            .values()
            .flat_map(|e| e.files.iter())
            .chain(self.new.histories.keys())
            .collect();
        let stale = self
            .old
            .experiments
            .values()
            .flat_map(|e| e.files.iter())
            .chain(self.old.histories.keys())
            .filter(|f| !keep.contains(f) && is_page_file(f));
        for f in stale {
            if std::fs::remove_file(self.dir.join(f)).is_ok() {
                self.done.removed += 1;
            }
        }
        let manifest = serde_json::to_string_pretty(&self.new).unwrap_or_default();
        self.out.put(MANIFEST, &manifest)?;
        self.done.written = self.out.written;
        Ok(self.done)
    }
}

/// What an experiment's page depends on, hashed.
fn experiment_signature(
    e: &Experiment,
    status: &str,
    runs: &[Run],
    previous: Option<i64>,
    previous_signature: Option<String>,
    next: Option<i64>,
) -> String {
    let cells: Vec<_> = runs
        .iter()
        .map(|r| {
            serde_json::json!([
                r.id,
                r.status.as_str(),
                r.attempt,
                r.iterations_done,
                r.finished_at,
                r.error,
                r.warmup,
                r.problems.malformed,
            ])
        })
        .collect();
    let text = serde_json::json!([
        SITE_FORMAT,
        e.id,
        e.name,
        status,
        e.finished_at,
        e.file_sha256,
        previous,
        previous_signature,
        next,
        cells
    ])
    .to_string();
    crate::experiment::plan::sha256_hex(text.as_bytes())
}

/// `h/<name>--<arm>--<metric>-<hash>.html`: readable, and distinct for
/// names that slug alike.
fn history_path(name: &str, arm: &str, metric: &str) -> String {
    use crate::report::archive::slugify;
    let hash = crate::experiment::plan::sha256_hex(
        serde_json::json!([name, arm, metric])
            .to_string()
            .as_bytes(),
    );
    format!(
        "h/{}--{}--{}-{}.html",
        slugify(name),
        slugify(arm),
        slugify(metric),
        &hash[..8]
    )
}

fn history_links(row: &IndexRow, name: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for metric in &row.metrics {
        for arm in &row.arms {
            out.push((arm.clone(), metric.clone(), history_path(name, arm, metric)));
        }
    }
    out
}
