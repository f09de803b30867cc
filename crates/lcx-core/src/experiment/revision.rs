//! Arms at code revisions: each asked revision is resolved to a commit,
//! checked out into a git worktree of the build cache and built once per
//! (commit, uncommitted changes, build command, toolchain), before any cell
//! runs. A failed build, a revision git cannot find or a config the
//! revision's lcx refuses stops the experiment before anything is measured.
//!
//! Cache layout (`.lcx/revisions/` beside the database, or
//! `LCX_REVISION_CACHE`):
//!
//! ```text
//! <sha12>[-dirty<diff8>]-<key8>/
//!     src/         git worktree at the commit (plus the diff, for `worktree`)
//!     bin/         lcx workloads: the revision's lcx (and lcx-torch)
//!     configs/     lcx workloads: configs the revision resolved, by sha256
//!     build.log    the build's output
//!     build.json   written last: the entry is complete
//!     used         touched whenever an experiment uses the entry
//! cargo-target/    one cargo target folder for every lcx revision: the
//!                  dependencies (tch, torch-sys) compile once
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::group::{self, GroupReaper};
use super::plan::{sha256_hex, Plan, Revision, Workload};
use super::run::StopSignal;

/// The revision that stands for the working tree as it is.
pub const WORKTREE: &str = "worktree";

/// How lcx workloads are built at a revision.
pub const LCX_BUILD: &str = "cargo build --release --locked";

/// Commits listed per arm in the report (`git log --oneline`).
const LOG_CAP: usize = 20;

/// Lines of a failed build's output kept in the error.
const TAIL_LINES: usize = 25;

#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    /// The experiment names a repository or revision that does not exist:
    /// the user's input.
    #[error("arm `{arm}`: {message}")]
    Unknown { arm: String, message: String },
    /// The revision's lcx refused the arm's config (an unknown key there).
    #[error("arm `{arm}`: the lcx of revision `{revision}` refused its config:\n{message}")]
    Config {
        arm: String,
        revision: String,
        message: String,
    },
    #[error(
        "arm `{}`: building revision `{}` ({}) with `{}` {}; the last lines of {}:\n{}",
        .0.arm, .0.revision, .0.sha, .0.command, .0.status, .0.log.display(), .0.tail
    )]
    Build(Box<BuildFailure>),
    /// Ctrl-C (or SIGTERM, SIGHUP) while a revision was building: the build
    /// was killed, its entry stays incomplete and is built again next time.
    #[error("arm `{arm}`: stopped while building revision `{revision}`; nothing was recorded")]
    Stopped { arm: String, revision: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

/// A build that failed: what ran, how it ended, and its output's end.
#[derive(Debug)]
pub struct BuildFailure {
    pub arm: String,
    pub revision: String,
    pub sha: String,
    pub command: String,
    pub status: String,
    pub log: PathBuf,
    pub tail: String,
}

impl RevisionError {
    /// Whether the experiment file (or `--revision`) is at fault: exit 2.
    pub fn is_user_input(&self) -> bool {
        matches!(
            self,
            RevisionError::Unknown { .. } | RevisionError::Config { .. }
        )
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RevisionError {
    let what = what.into();
    move |source| RevisionError::Io { what, source }
}

/// Writes `text` as the whole of the cache's file `path`: into a new
/// temporary file beside it, renamed in (`crate::files`), so that two runs
/// building at once, or a link at the name, never leave half a file.
fn write_whole(path: &Path, text: &str) -> Result<(), RevisionError> {
    crate::files::replace("the revision cache", path, text.as_bytes(), &[]).map_err(|e| {
        RevisionError::Io {
            what: format!("writing {}", path.display()),
            source: std::io::Error::other(e),
        }
    })
}

/// The build cache.
#[derive(Debug, Clone)]
pub struct Cache {
    pub root: PathBuf,
    /// The libtorch lcx itself was built against (its `lib/` folder): a
    /// build of another lcx revision gets it as `LIBTORCH` when the
    /// environment sets none, so it links what this lcx runs.
    pub libtorch_lib: Option<PathBuf>,
    /// The runner's stop signal: a Ctrl-C reaches a running build's process
    /// group through it. `None`: the default signal handling ends lcx, and
    /// the build's watchdog then kills the build.
    pub stop: Option<Arc<StopSignal>>,
}

impl Cache {
    /// `LCX_REVISION_CACHE`, else `.lcx/revisions/` in the database's folder
    /// (the repository root for lcx's own `lcx.db`).
    pub fn for_db(db: &Path) -> Cache {
        if let Some(dir) = std::env::var_os("LCX_REVISION_CACHE").filter(|d| !d.is_empty()) {
            // Absolute: git resolves a relative worktree path against the
            // repository, lcx against its own folder.
            return Cache {
                root: absolute(Path::new(&dir)),
                libtorch_lib: None,
                stop: None,
            };
        }
        let dir = match db.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(dir) => absolute(dir),
            None => std::env::current_dir().unwrap_or_default(),
        };
        Cache {
            root: dir.join(".lcx").join("revisions"),
            libtorch_lib: None,
            stop: None,
        }
    }

    /// The same cache, with the libtorch that builds of lcx revisions link.
    pub fn with_libtorch(self, lib: Option<&Path>) -> Cache {
        Cache {
            libtorch_lib: lib.map(Path::to_path_buf),
            ..self
        }
    }

    /// The same cache, with builds that a stop signal reaches.
    pub fn with_stop(self, stop: Option<Arc<StopSignal>>) -> Cache {
        Cache { stop, ..self }
    }

    /// The shared cargo target folder of lcx builds.
    fn cargo_target(&self) -> PathBuf {
        self.root.join("cargo-target")
    }

    /// Every entry, complete or not, newest use first.
    pub fn entries(&self) -> Result<Vec<Entry>, RevisionError> {
        let mut out = Vec::new();
        let read = match std::fs::read_dir(&self.root) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io(format!("reading {}", self.root.display()))(e)),
        };
        for item in read {
            let item = item.map_err(io(format!("reading {}", self.root.display())))?;
            let path = item.path();
            if !path.is_dir() || path == self.cargo_target() {
                continue;
            }
            let record = BuildRecord::read(&path);
            let used = std::fs::metadata(path.join("used"))
                .or_else(|_| std::fs::metadata(&path))
                .and_then(|m| m.modified())
                .ok();
            out.push(Entry {
                bytes: dir_size(&path),
                path,
                record,
                used,
            });
        }
        out.sort_by_key(|e| std::cmp::Reverse(e.used));
        Ok(out)
    }

    /// Removes an entry: its git worktree registration, its files, and its
    /// lock files. Keeps it when another lcx is building it or a running
    /// experiment's cells use it.
    pub fn remove(&self, entry: &Entry) -> Result<Removal, RevisionError> {
        let lock_path = entry.path.with_extension("lock");
        let use_path = entry.path.with_extension("use");
        let Some(_lock) = Lock::try_take(&lock_path)? else {
            return Ok(Removal::Building);
        };
        let Some(_use) = Lock::try_take(&use_path)? else {
            return Ok(Removal::InUse);
        };
        let src = entry.path.join("src");
        if let Some(repo) = entry.record.as_ref().map(|r| r.repository.clone()) {
            // Best effort: the repository may be gone; `worktree prune`
            // there later forgets the stale registration.
            let _ = git(
                &repo,
                &["worktree", "remove", "--force", &src.to_string_lossy()],
            );
        }
        std::fs::remove_dir_all(&entry.path)
            .map_err(io(format!("removing {}", entry.path.display())))?;
        if let Some(repo) = entry.record.as_ref().map(|r| r.repository.clone()) {
            let _ = git(&repo, &["worktree", "prune"]);
        }
        // Deleted while held: whoever waits on them takes them again on a
        // new file (see `Lock::flock`).
        let _ = std::fs::remove_file(&lock_path);
        let _ = std::fs::remove_file(&use_path);
        Ok(Removal::Removed)
    }

    /// The shared cargo target's lock, or `None` while a build holds it:
    /// whoever holds it may remove the folder.
    pub fn lock_target(&self) -> Result<Option<impl Drop>, RevisionError> {
        Lock::try_take(&self.root.join("cargo-target.lock"))
    }

    /// Removes lock files left without their entry (nobody holding them);
    /// returns how many. The shared cargo target's lock goes too when
    /// `target` (that folder was removed).
    pub fn remove_stale_locks(&self, target: bool) -> Result<usize, RevisionError> {
        let read = match std::fs::read_dir(&self.root) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(io(format!("reading {}", self.root.display()))(e)),
        };
        let mut removed = 0;
        for item in read {
            let path = item
                .map_err(io(format!("reading {}", self.root.display())))?
                .path();
            let ext = path.extension().and_then(|e| e.to_str());
            if !matches!(ext, Some("lock" | "use")) {
                continue;
            }
            let owner = path.with_extension("");
            let orphan = if owner == self.cargo_target() {
                target && !owner.exists()
            } else {
                !owner.exists()
            };
            if orphan {
                if let Some(_held) = Lock::try_take(&path)? {
                    std::fs::remove_file(&path)
                        .map_err(io(format!("removing {}", path.display())))?;
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }
}

/// What [`Cache::remove`] did with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    Removed,
    /// Another lcx is building it.
    Building,
    /// A running experiment's cells use it (a lease is held).
    InUse,
}

/// One cache entry as `lcx cache list` shows it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: PathBuf,
    /// `None`: the build never completed (failed, or still running).
    pub record: Option<BuildRecord>,
    pub used: Option<SystemTime>,
    pub bytes: u64,
}

impl BuildRecord {
    /// An entry's `build.json`; `None` while its build is incomplete.
    fn read(entry: &Path) -> Option<BuildRecord> {
        let text = std::fs::read_to_string(entry.join("build.json")).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// `build.json`: what was built, how, and how long it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    pub asked: String,
    pub repository: PathBuf,
    pub sha: String,
    pub diff_sha256: Option<String>,
    pub command: String,
    pub toolchain: String,
    pub seconds: f64,
    /// Seconds since the Unix epoch.
    pub built_at: u64,
    pub version: Option<String>,
}

/// What `prepare` says while it works (one line each).
pub trait Progress {
    fn line(&mut self, text: &str);
}

impl<F: FnMut(&str)> Progress for F {
    fn line(&mut self, text: &str) {
        self(text)
    }
}

/// What a dry run says about one arm's revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub arm: String,
    pub revision: Revision,
    pub command: String,
    /// The entry exists and is complete.
    pub cached: bool,
    pub entry: PathBuf,
}

/// Resolves every arm's revision without building or writing anything.
pub fn survey(plan: &Plan, cache: &Cache) -> Result<Vec<Planned>, RevisionError> {
    let mut out = Vec::new();
    let toolchain = toolchain_if(plan);
    for arm in &plan.arms {
        let Some(asked) = &arm.revision else {
            continue;
        };
        let mut revision = asked.clone();
        resolve(&arm.name, &mut revision, &cache.root)?;
        let command = build_command(plan.workload, &revision);
        let entry = cache.root.join(entry_name(&revision, &command, &toolchain));
        out.push(Planned {
            arm: arm.name.clone(),
            cached: entry.join("build.json").is_file(),
            revision,
            command,
            entry,
        });
    }
    Ok(out)
}

/// Resolves, checks out and builds every revision the plan's arms ask for,
/// and fills in the arms: the resolved sha, the checkout, the binary, the
/// config the revision's lcx resolved, the commits since the baseline.
/// Idempotent: a plan prepared before (a resume) keeps its shas and only
/// rebuilds what the cache lost. The leases it returns keep `cache prune`
/// from removing the builds while they are held.
pub fn prepare(
    plan: &mut Plan,
    cache: &Cache,
    progress: &mut dyn Progress,
) -> Result<Leases, RevisionError> {
    let mut leases = Leases::default();
    if plan.arms.iter().all(|a| a.revision.is_none()) {
        return Ok(leases);
    }
    let toolchain = toolchain_if(plan);
    let workload = plan.workload;
    let config_file = plan.config.clone();
    let experiment_dir = plan.file.parent().map(Path::to_path_buf);
    // Every revision resolves before anything is built: a typo in the last
    // arm does not wait for the first arm's build.
    let mut had_sha = Vec::new();
    for arm in &mut plan.arms {
        had_sha.push(arm.revision.as_ref().is_some_and(|r| r.sha.is_some()));
        if let Some(revision) = arm.revision.as_mut() {
            resolve(&arm.name, revision, &cache.root)?;
        }
    }
    for (arm, had_sha) in plan.arms.iter_mut().zip(had_sha) {
        let Some(revision) = arm.revision.as_mut() else {
            continue;
        };
        let command = build_command(workload, revision);
        let entry = cache.root.join(entry_name(revision, &command, &toolchain));
        if had_sha && revision.diff_sha256.is_some() && !entry.join("build.json").is_file() {
            return Err(RevisionError::Unknown {
                arm: arm.name.clone(),
                message: format!(
                    "the snapshot of the working tree this arm ran ({}) is no longer in the \
                     build cache; start a new experiment",
                    entry.display()
                ),
            });
        }
        let (record, lease) = build_entry(
            &arm.name, revision, &entry, &command, &toolchain, workload, cache, progress,
        )?;
        leases.0.push(lease);
        let _ = std::fs::write(entry.join("used"), b"");
        let src = entry.join("src");
        revision.checkout = Some(src.clone());
        // Cells run where they would in the repository: the experiment
        // file's folder inside the checkout, else its root.
        let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let rel = experiment_dir
            .as_deref()
            .and_then(|d| {
                canonical(d)
                    .strip_prefix(canonical(&revision.repository))
                    .ok()
                    .map(Path::to_path_buf)
            })
            .unwrap_or_default();
        let workdir = src.join(rel);
        if workload.uses_config() {
            let binary = entry.join("bin").join("lcx");
            revision.binary = Some(binary.clone());
            revision.version = record.version;
            let config = match &config_file {
                Some(file) => Some(file.clone()),
                // As `lcx bench` starts from configs/default.toml, the
                // revision's benches start from the revision's own.
                None if workload != Workload::Train => {
                    Some(src.join("configs").join("default.toml")).filter(|p| p.is_file())
                }
                None => None,
            };
            // A resume runs the config recorded for the arm, whatever the
            // config file says now.
            let text = match (&arm.config_toml, had_sha) {
                (Some(text), true) => text.clone(),
                _ => resolve_config(&arm.name, revision, &binary, config.as_deref())?,
            };
            let sha = sha256_hex(text.as_bytes());
            let dir = entry.join("configs");
            std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
            let path = dir.join(format!("{sha}.toml"));
            write_whole(&path, &text)?;
            // A file, not standard input: revisions from before `--config -`
            // read their config the same way.
            if let Some(at) = arm.args.windows(2).position(|w| w[0] == "--config") {
                arm.args[at + 1] = path.display().to_string();
            }
            arm.config_toml = Some(text);
            arm.config_sha256 = Some(sha);
        } else {
            arm.workdir = Some(workdir);
        }
    }
    // What each arm changes against its baseline (in a sweep, the one at
    // its point: a `revision` axis gives each point its own), for the report.
    let bases: Vec<Option<Option<Revision>>> = plan
        .arms
        .iter()
        .map(|arm| {
            let base = plan.baseline_of(&arm.name).filter(|b| *b != arm.name)?;
            plan.arms
                .iter()
                .find(|a| a.name == base)
                .map(|a| a.revision.clone())
        })
        .collect();
    let base_sha = |base: &Option<Revision>, repo: &Path| -> Option<String> {
        match base {
            Some(r) if r.repository == repo => r.sha.clone(),
            Some(_) => None,
            None => git_text(repo, &["rev-parse", "HEAD"]).ok(),
        }
    };
    for (arm, base) in plan.arms.iter_mut().zip(bases) {
        // The baseline itself, or an arm without a baseline to compare.
        let Some(base) = base else {
            continue;
        };
        let Some(revision) = arm.revision.as_mut() else {
            continue;
        };
        let (Some(sha), Some(from)) = (revision.sha.clone(), base_sha(&base, &revision.repository))
        else {
            continue;
        };
        let range = format!("{from}..{sha}");
        revision.log_total = git_text(&revision.repository, &["rev-list", "--count", &range])
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        revision.log = git_text(
            &revision.repository,
            &[
                "log",
                "--oneline",
                "--no-decorate",
                &format!("-n{LOG_CAP}"),
                &range,
            ],
        )
        .map(|t| t.lines().map(str::to_string).collect())
        .unwrap_or_default();
    }
    Ok(leases)
}

/// `rustc -V` and `cargo -V` for lcx builds (part of the cache key: a new
/// toolchain builds again); nothing for command builds, whose tools lcx
/// cannot name.
fn toolchain_if(plan: &Plan) -> String {
    if !plan.workload.uses_config() || plan.arms.iter().all(|a| a.revision.is_none()) {
        return String::new();
    }
    let version = |tool: &str| {
        Command::new(tool)
            .arg("-V")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    format!("{}; {}", version("rustc"), version("cargo"))
}

fn build_command(workload: Workload, revision: &Revision) -> String {
    if workload.uses_config() {
        LCX_BUILD.to_string()
    } else {
        revision.build.clone().unwrap_or_default()
    }
}

/// `<sha12>[-dirty<diff8>]-<key8>`, key = build command and toolchain.
fn entry_name(revision: &Revision, command: &str, toolchain: &str) -> String {
    let sha = revision.sha.as_deref().unwrap_or("unresolved");
    let key = sha256_hex(format!("{command}\n{toolchain}").as_bytes());
    let dirty = revision
        .diff_sha256
        .as_deref()
        .map(|d| format!("-dirty{}", &d[..8.min(d.len())]))
        .unwrap_or_default();
    format!("{}{dirty}-{}", &sha[..12.min(sha.len())], &key[..8])
}

/// Fills in `repository` (the top level), `sha` and, for `worktree`,
/// `diff_sha256`. A sha already there (a prepared plan) is kept.
fn resolve(arm: &str, revision: &mut Revision, cache_root: &Path) -> Result<(), RevisionError> {
    let unknown = |message: String| RevisionError::Unknown {
        arm: arm.to_string(),
        message,
    };
    let top = git_text(&revision.repository, &["rev-parse", "--show-toplevel"]).map_err(|e| {
        unknown(format!(
            "{} is not in a git repository ({e}); set `repository` to one",
            revision.repository.display()
        ))
    })?;
    revision.repository = PathBuf::from(top);
    if revision.sha.is_some() {
        return Ok(());
    }
    if revision.asked == WORKTREE {
        let sha =
            git_text(&revision.repository, &["rev-parse", "--verify", "HEAD"]).map_err(|e| {
                unknown(format!(
                    "`worktree`: the repository has no commit yet ({e})"
                ))
            })?;
        revision.diff_sha256 = worktree_diff(&revision.repository, cache_root)
            .map_err(|e| unknown(format!("`worktree`: {e}")))?
            .map(|d| d.sha256);
        revision.sha = Some(sha);
        return Ok(());
    }
    let spec = format!("{}^{{commit}}", revision.asked);
    let sha = git_text(
        &revision.repository,
        &["rev-parse", "--verify", "--quiet", &spec],
    )
    .map_err(|_| {
        unknown(format!(
            "revision `{}` is not a commit of {}",
            revision.asked,
            revision.repository.display()
        ))
    })?;
    revision.sha = Some(sha);
    Ok(())
}

/// The uncommitted state of a working tree: the diff against HEAD and the
/// untracked files git does not ignore (the build cache excluded).
struct Diff {
    patch: Vec<u8>,
    untracked: Vec<PathBuf>,
    sha256: String,
}

fn worktree_diff(repo: &Path, cache_root: &Path) -> Result<Option<Diff>, String> {
    // Fixed prefixes and no colour, whatever the user's git config says,
    // so that `git apply` takes the patch.
    let patch = git(
        repo,
        &[
            "diff",
            "HEAD",
            "--binary",
            "--no-ext-diff",
            "--no-color",
            "--src-prefix=a/",
            "--dst-prefix=b/",
        ],
    )?;
    let listed = git(repo, &["ls-files", "--others", "--exclude-standard", "-z"])?;
    let cache_root = absolute(cache_root);
    let mut untracked: Vec<PathBuf> = listed
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        .filter(|p| !repo.join(p).starts_with(&cache_root))
        .collect();
    untracked.sort();
    if patch.is_empty() && untracked.is_empty() {
        return Ok(None);
    }
    let mut hashed = patch.clone();
    for path in &untracked {
        hashed.extend_from_slice(path.to_string_lossy().as_bytes());
        hashed.push(0);
        hashed.extend(
            std::fs::read(repo.join(path)).map_err(|e| format!("{}: {e}", path.display()))?,
        );
        hashed.push(0);
    }
    Ok(Some(Diff {
        sha256: sha256_hex(&hashed),
        patch,
        untracked,
    }))
}

/// Checks out and builds one entry unless it is complete, under a lock so
/// that two `lcx run`s never build the same entry at once; returns its
/// record and a lease on it.
#[expect(
    clippy::too_many_arguments,
    reason = "one call site; the arguments are the entry's key"
)]
fn build_entry(
    arm: &str,
    revision: &Revision,
    entry: &Path,
    command: &str,
    toolchain: &str,
    workload: Workload,
    cache: &Cache,
    progress: &mut dyn Progress,
) -> Result<(BuildRecord, Lock), RevisionError> {
    let shown = revision.describe();
    let record_path = entry.join("build.json");
    std::fs::create_dir_all(&cache.root).map_err(io(format!(
        "creating the build cache {}",
        cache.root.display()
    )))?;
    let _lock = Lock::take(&entry.with_extension("lock"))?;
    if let Some(record) = BuildRecord::read(entry) {
        progress.line(&format!(
            "revision {shown} (arm `{arm}`): cached build ({:.1} s when built), {}",
            record.seconds,
            entry.display()
        ));
        // Leased while the build lock is held: prune, which takes both,
        // cannot remove it in between.
        return Ok((record, Lock::share(&entry.with_extension("use"))?));
    }
    let sha = revision.sha.clone().unwrap_or_default();
    // A partial entry (a build that failed or was killed) starts over.
    if entry.exists() {
        let _ = git(
            &revision.repository,
            &[
                "worktree",
                "remove",
                "--force",
                &entry.join("src").to_string_lossy(),
            ],
        );
        std::fs::remove_dir_all(entry).map_err(io(format!("removing {}", entry.display())))?;
    }
    let _ = git(&revision.repository, &["worktree", "prune"]);
    std::fs::create_dir_all(entry).map_err(io(format!("creating {}", entry.display())))?;
    let src = entry.join("src");
    git(
        &revision.repository,
        &[
            "worktree",
            "add",
            "--detach",
            "--force",
            &src.to_string_lossy(),
            &sha,
        ],
    )
    .map_err(|e| RevisionError::Unknown {
        arm: arm.to_string(),
        message: format!(
            "cannot check out {sha} of {}: {e}",
            revision.repository.display()
        ),
    })?;
    if revision.diff_sha256.is_some() {
        apply_worktree(arm, revision, &src, &cache.root)?;
    }
    let started = Instant::now();
    let log_path = entry.join("build.log");
    let version = if command.is_empty() {
        progress.line(&format!(
            "revision {shown} (arm `{arm}`): checked out, nothing to build"
        ));
        None
    } else {
        progress.line(&format!(
            "revision {shown} (arm `{arm}`): building with `{command}` in {} …",
            src.display()
        ));
        let log = std::fs::File::create(&log_path)
            .map_err(io(format!("creating {}", log_path.display())))?;
        let err_log = log
            .try_clone()
            .map_err(io(format!("opening {}", log_path.display())))?;
        let mut build = Command::new("sh");
        build
            .arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err_log)
            // Builds run at the checkout's root, as `make` or cargo would.
            .current_dir(&src);
        if workload.uses_config() {
            build.env("CARGO_TARGET_DIR", cache.cargo_target());
            if std::env::var_os("LIBTORCH").is_none() {
                if let Some(lib) = &cache.libtorch_lib {
                    if let Some(root) = lib.parent() {
                        build.env("LIBTORCH", root);
                    }
                }
            }
        }
        // One cargo target folder serves every lcx revision: hold it from
        // this build until its binaries are copied out, or another
        // revision's build could relink them in between.
        let _target = if workload.uses_config() {
            std::fs::create_dir_all(cache.cargo_target())
                .map_err(io(format!("creating {}", cache.cargo_target().display())))?;
            Some(Lock::take(&cache.root.join("cargo-target.lock"))?)
        } else {
            None
        };
        // The build dies with lcx however lcx ends (as a cell does): its own
        // process group, PDEATHSIG for the shell, a watchdog for cargo and
        // what cargo started. It never outlives lcx to write into the cache.
        group::own_group_dying_with_us(&mut build);
        let mut child = build.spawn().map_err(io(format!("starting `{command}`")))?;
        let leader = child.id() as i32;
        let reaper = GroupReaper::spawn(leader);
        if let Some(stop) = &cache.stop {
            stop.set_child(leader);
        }
        let status = child.wait();
        if let Some(stop) = &cache.stop {
            stop.clear_child();
        }
        // Whatever the build left running in its group goes with it.
        drop(reaper);
        let status = status.map_err(io(format!("waiting for `{command}`")))?;
        if cache.stop.as_ref().is_some_and(|s| s.is_stopped()) {
            return Err(RevisionError::Stopped {
                arm: arm.to_string(),
                revision: revision.asked.clone(),
            });
        }
        if !status.success() {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
            return Err(RevisionError::Build(Box::new(BuildFailure {
                arm: arm.to_string(),
                revision: revision.asked.clone(),
                sha,
                command: command.to_string(),
                status: match status.code() {
                    Some(code) => format!("exited with {code}"),
                    None => "was killed by a signal".to_string(),
                },
                log: log_path,
                tail,
            })));
        }
        if workload.uses_config() {
            Some(install_lcx(arm, revision, entry, cache)?)
        } else {
            None
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let record = BuildRecord {
        asked: revision.asked.clone(),
        repository: revision.repository.clone(),
        sha,
        diff_sha256: revision.diff_sha256.clone(),
        command: command.to_string(),
        toolchain: toolchain.to_string(),
        seconds,
        built_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        version: version.flatten(),
    };
    let text = serde_json::to_string_pretty(&record).unwrap_or_default();
    write_whole(&record_path, &text)?;
    if !command.is_empty() {
        progress.line(&format!(
            "revision {shown} (arm `{arm}`): built in {seconds:.1} s"
        ));
    }
    Ok((record, Lock::share(&entry.with_extension("use"))?))
}

/// Copies the built binaries out of the shared target folder (the next
/// revision's build overwrites them there) and asks the binary its version.
fn install_lcx(
    arm: &str,
    revision: &Revision,
    entry: &Path,
    cache: &Cache,
) -> Result<Option<String>, RevisionError> {
    let release = cache.cargo_target().join("release");
    let bin = entry.join("bin");
    std::fs::create_dir_all(&bin).map_err(io(format!("creating {}", bin.display())))?;
    let front = release.join("lcx");
    if !front.is_file() {
        return Err(RevisionError::Unknown {
            arm: arm.to_string(),
            message: format!(
                "revision `{}` built, but no `lcx` binary came out of it ({} is missing)",
                revision.asked,
                front.display()
            ),
        });
    }
    for name in ["lcx", "lcx-torch"] {
        let from = release.join(name);
        if from.is_file() {
            let to = bin.join(name);
            std::fs::copy(&from, &to).map_err(io(format!("copying {}", from.display())))?;
        }
    }
    // The torch version belongs in the provenance: `version --verbose` says
    // it; revisions from before that flag say it in `--version`.
    let ask = |args: &[&str]| {
        Command::new(bin.join("lcx"))
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .map(|l| l.trim().to_string())
            })
    };
    Ok(ask(&["version", "--verbose"]).or_else(|| ask(&["--version"])))
}

/// Puts the working tree's uncommitted changes into the checkout.
fn apply_worktree(
    arm: &str,
    revision: &Revision,
    src: &Path,
    cache_root: &Path,
) -> Result<(), RevisionError> {
    let failed = |message: String| RevisionError::Unknown {
        arm: arm.to_string(),
        message: format!("`worktree`: {message}"),
    };
    let diff = worktree_diff(&revision.repository, cache_root)
        .map_err(failed)?
        .ok_or_else(|| failed("the working tree has no changes any more".into()))?;
    if Some(&diff.sha256) != revision.diff_sha256.as_ref() {
        return Err(failed(
            "the working tree changed while the experiment was being prepared".into(),
        ));
    }
    if !diff.patch.is_empty() {
        let mut apply = Command::new("git")
            .arg("-C")
            .arg(src)
            .args(["apply", "--binary", "--whitespace=nowarn", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(format!("cannot run git apply: {e}")))?;
        if let Some(mut stdin) = apply.stdin.take() {
            stdin
                .write_all(&diff.patch)
                .map_err(|e| failed(format!("git apply: {e}")))?;
        }
        let out = apply
            .wait_with_output()
            .map_err(|e| failed(format!("git apply: {e}")))?;
        if !out.status.success() {
            return Err(failed(format!(
                "git apply: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    for path in &diff.untracked {
        let to = src.join(path);
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        }
        std::fs::copy(revision.repository.join(path), &to)
            .map_err(io(format!("copying {}", path.display())))?;
    }
    Ok(())
}

/// The arm's config as the revision's own lcx resolves it (`lcx config
/// show`): the revision validates keys it knows, and fills in its own
/// defaults.
fn resolve_config(
    arm: &str,
    revision: &Revision,
    binary: &Path,
    config: Option<&Path>,
) -> Result<String, RevisionError> {
    let mut show = Command::new(binary);
    show.args(["config", "show"]);
    if let Some(config) = config {
        show.arg("--config").arg(config);
    }
    for set in &revision.config_sets {
        show.arg("--set").arg(set);
    }
    let out = show
        .stdin(Stdio::null())
        .output()
        .map_err(io(format!("running {}", binary.display())))?;
    if !out.status.success() {
        return Err(RevisionError::Config {
            arm: arm.to_string(),
            revision: revision.describe(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A `flock` on a file, released when dropped. Exclusive for building or
/// removing an entry (`ENTRY.lock`, and `ENTRY.use` when removing), shared
/// for using one (`ENTRY.use`, held by every runner whose cells run the
/// build, for as long as it runs).
#[derive(Debug)]
struct Lock(std::fs::File);

impl Lock {
    /// The exclusive lock, or `None` when another process holds it.
    fn try_take(path: &Path) -> Result<Option<Lock>, RevisionError> {
        Self::flock(path, libc::LOCK_EX | libc::LOCK_NB)
    }

    fn take(path: &Path) -> Result<Lock, RevisionError> {
        Self::flock(path, libc::LOCK_EX)?.ok_or_else(|| {
            io(format!("locking {}", path.display()))(std::io::Error::other("lock not taken"))
        })
    }

    /// A shared lock: a lease on an entry in use.
    fn share(path: &Path) -> Result<Lock, RevisionError> {
        Self::flock(path, libc::LOCK_SH)?.ok_or_else(|| {
            io(format!("locking {}", path.display()))(std::io::Error::other("lock not taken"))
        })
    }

    fn flock(path: &Path, how: libc::c_int) -> Result<Option<Lock>, RevisionError> {
        use std::os::unix::fs::MetadataExt;
        loop {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(path)
                .map_err(io(format!("opening {}", path.display())))?;
            if let Err(err) = crate::system::lock::flock(&file, how) {
                if err.kind() == std::io::ErrorKind::WouldBlock {
                    return Ok(None);
                }
                return Err(io(format!("locking {}", path.display()))(err));
            }
            // `cache prune` deletes the lock files of what it removed while
            // it holds them: a lock taken on a deleted file guards nothing,
            // so it is taken again on the file now at the path.
            let held = file.metadata().map(|m| (m.dev(), m.ino()));
            let now = std::fs::metadata(path).map(|m| (m.dev(), m.ino()));
            if let (Ok(held), Ok(now)) = (held, now) {
                if held == now {
                    return Ok(Some(Lock(file)));
                }
            }
        }
    }
}

/// Leases on the cache entries a runner's cells use: `cache prune` keeps
/// those entries until the leases are dropped (the runner ends or dies).
#[derive(Debug, Default)]
#[must_use = "an entry is protected from `cache prune` only while its lease is held"]
pub struct Leases(Vec<Lock>);

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = crate::system::lock::flock(&self.0, libc::LOCK_UN);
    }
}

fn git(repo: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// `git -C repo args…`'s trimmed output, or its error message.
pub(super) fn git_text(repo: &Path, args: &[&str]) -> Result<String, String> {
    git(repo, args).map(|o| String::from_utf8_lossy(&o).trim().to_string())
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn dir_size(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|read| read.flatten().map(|e| dir_size(&e.path())).sum())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision(asked: &str, sha: Option<&str>, diff: Option<&str>) -> Revision {
        Revision {
            asked: asked.into(),
            repository: PathBuf::from("/r"),
            sha: sha.map(str::to_string),
            diff_sha256: diff.map(str::to_string),
            ..Revision::default()
        }
    }

    #[test]
    fn entries_are_keyed_by_sha_diff_command_and_toolchain() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let clean = revision("main", Some(sha), None);
        let dirty = revision("worktree", Some(sha), Some("feedbeef00"));
        let a = entry_name(&clean, "make", "");
        assert!(a.starts_with("0123456789ab-"), "{a}");
        assert_eq!(a, entry_name(&revision("v1", Some(sha), None), "make", ""));
        assert_ne!(a, entry_name(&clean, "make all", ""));
        assert_ne!(a, entry_name(&clean, "make", "rustc 1.90"));
        let d = entry_name(&dirty, "make", "");
        assert!(d.starts_with("0123456789ab-dirtyfeedbeef-"), "{d}");
    }

    #[test]
    fn a_revision_describes_itself_with_its_sha() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            revision("main", Some(sha), None).describe(),
            "main@0123456789ab"
        );
        assert_eq!(
            revision("0123456789", Some(sha), None).describe(),
            "0123456789ab"
        );
        assert_eq!(revision(sha, Some(sha), None).describe(), "0123456789ab");
        assert_eq!(
            revision("worktree", Some(sha), Some("ab")).describe(),
            "worktree@0123456789ab+dirty"
        );
        assert_eq!(revision("main", None, None).describe(), "main");
    }
}
