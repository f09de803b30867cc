//! Reads shaped for reports: an experiment by id, name or recency, its runs,
//! per-run metric series, warm-up-excluded aggregates, and read-only SQL.
//! (The report side's own aggregate queries live in `report_read.rs`.)

use std::time::{Duration, Instant};

use rusqlite::types::ValueRef;
use rusqlite::{params, OptionalExtension, Row};
use serde::de::DeserializeOwned;

use super::types::*;
use super::{Liveness, RunnerIdentity, Store, StoreError};

const EXPERIMENT_COLUMNS: &str = "id, name, description, workload, file_path, file_text,
    file_sha256, plan_json, iterations, warmup, repeats, baseline, status, created_at,
    finished_at, lcx_version, git_commit, git_dirty, command_line, runner_pid, hostname, os,
    cpu_model, cpu_cores, memory_bytes, gpu_name, gpu_driver, cuda_version, cuda_available,
    torch_version, torch_intra_threads, torch_inter_threads, runner_host, runner_boot_id,
    runner_start_ticks, peak_isa, peak_fp32_gflops_core, peak_fp32_gflops,
    peak_stream_gbytes_per_second, detached_at, peak_source, peak_tries, peak_spread,
    peak_probed_at, peak_note";

const RUN_COLUMNS: &str = "id, experiment_id, arm, arm_label, arm_index, repeat, attempt,
    config_toml, config_sha256, command_json, env_json, status, skip_reason, exit_code, signal,
    error, stderr_tail, iterations_done, started_at, finished_at, wall_seconds,
    malformed_lines, nonfinite_values, overlong_lines, warmup,
    revision, revision_sha, revision_diff_sha256, binary_version, host, slurm_job,
    slurm_dir, node_json, slurm_run, db_wait_seconds, cpu_seconds, foreign_cpu_seconds,
    host_seconds, host_cpus, steal_seconds, load_start, load_end, cpu_mhz_min, cpu_mhz_max,
    swapped_pages, gpu_other_processes, rerun_note, cpus, extra_lines, runner_stall_seconds,
    foreign_processes";

/// The runner identity of an experiment row (`None` without a pid).
pub(super) fn runner_identity(
    pid: Option<i64>,
    host: Option<String>,
    boot_id: Option<String>,
    start_ticks: Option<String>,
) -> Option<RunnerIdentity> {
    pid.map(|pid| RunnerIdentity {
        pid,
        host,
        boot_id,
        start_ticks,
    })
}

/// The status readers see: `running` with a runner that is gone reads
/// `abandoned`.
pub(super) fn effective_status(
    stored: ExperimentStatus,
    runner: Option<&RunnerIdentity>,
    detached: bool,
) -> ExperimentStatus {
    match (stored, runner) {
        // Left to its Slurm jobs: no coordinator is following them, and
        // none is expected to until `lcx run --attach`.
        (ExperimentStatus::Running, None) if detached => ExperimentStatus::Detached,
        (ExperimentStatus::Running, Some(r)) if detached && r.liveness() == Liveness::Gone => {
            ExperimentStatus::Detached
        }
        (ExperimentStatus::Running, Some(r)) if r.liveness() == Liveness::Gone => {
            ExperimentStatus::Abandoned
        }
        (status, _) => status,
    }
}

/// A value of a read-only query's result (serialises untagged, so
/// `lcx query --format json` prints plain JSON values).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum SqlValue {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// The result of [`Store::query`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueryResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<SqlValue>>,
}

pub(super) fn parse_json<T: DeserializeOwned + Default>(
    column: &'static str,
    text: Option<String>,
) -> Result<T, StoreError> {
    match text {
        None => Ok(T::default()),
        Some(text) => {
            serde_json::from_str(&text).map_err(|source| StoreError::Json { column, source })
        }
    }
}

/// The experiment, its stored status, its command line (JSON) and
/// whether `--detach` left it to its jobs.
type RawExperiment = (Experiment, String, Option<String>, bool);

/// Raw row → struct in two steps so JSON/enum parse errors surface as
/// [`StoreError`] rather than being squeezed through rusqlite's error type.
// This, `run_from_row` and report_read.rs's row closures look alike line
// by line, `field: row.get(N)?`, because each names its own SELECT's
// columns by position; there is no shared logic to pull out of them.
fn experiment_from_row(row: &Row<'_>) -> rusqlite::Result<RawExperiment> {
    let status: String = row.get(12)?;
    let command_line: Option<String> = row.get(18)?;
    let experiment = Experiment {
        id: row.get(0)?,
        name: row.get(1)?,
        description: row.get(2)?,
        workload: row.get(3)?,
        file_path: row.get(4)?,
        file_text: row.get(5)?,
        file_sha256: row.get(6)?,
        plan_json: row.get(7)?,
        iterations: row.get(8)?,
        warmup: row.get(9)?,
        repeats: row.get(10)?,
        baseline: row.get(11)?,
        status: ExperimentStatus::Running,
        created_at: row.get(13)?,
        finished_at: row.get(14)?,
        lcx_version: row.get(15)?,
        git_commit: row.get(16)?,
        git_dirty: row.get(17)?,
        command_line: Vec::new(),
        runner: runner_identity(row.get(19)?, row.get(32)?, row.get(33)?, row.get(34)?),
        fingerprint: Fingerprint {
            hostname: row.get(20)?,
            os: row.get(21)?,
            cpu_model: row.get(22)?,
            cpu_cores: row.get(23)?,
            memory_bytes: row.get(24)?,
            gpu_name: row.get(25)?,
            gpu_driver: row.get(26)?,
            cuda_version: row.get(27)?,
            cuda_available: row.get(28)?,
            torch_version: row.get(29)?,
            torch_intra_threads: row.get(30)?,
            torch_inter_threads: row.get(31)?,
            peak_isa: row.get(35)?,
            peak_fp32_gflops_core: row.get(36)?,
            peak_fp32_gflops: row.get(37)?,
            peak_stream_gbytes_per_second: row.get(38)?,
            peak_source: row.get(40)?,
            peak_tries: row.get(41)?,
            peak_spread: row.get(42)?,
            peak_probed_at: row.get(43)?,
            peak_note: row.get(44)?,
        },
    };
    let detached = row.get::<_, Option<String>>(39)?.is_some();
    Ok((experiment, status, command_line, detached))
}

fn finish_experiment(raw: RawExperiment) -> Result<Experiment, StoreError> {
    let (mut experiment, status, command_line, detached) = raw;
    experiment.status = effective_status(status.parse()?, experiment.runner.as_ref(), detached);
    experiment.command_line = parse_json("experiments.command_line", command_line)?;
    Ok(experiment)
}

type RawRun = (Run, String, Option<String>, Option<String>, Option<String>);

fn run_from_row(row: &Row<'_>) -> rusqlite::Result<RawRun> {
    let run = Run {
        id: row.get(0)?,
        experiment_id: row.get(1)?,
        arm: row.get(2)?,
        arm_label: row.get(3)?,
        arm_index: row.get(4)?,
        repeat: row.get(5)?,
        attempt: row.get(6)?,
        config_toml: row.get(7)?,
        config_sha256: row.get(8)?,
        command: Vec::new(),
        env: Default::default(),
        status: RunStatus::Pending,
        skip_reason: row.get(12)?,
        exit_code: row.get(13)?,
        signal: row.get(14)?,
        error: row.get(15)?,
        stderr_tail: row.get(16)?,
        iterations_done: row.get(17)?,
        started_at: row.get(18)?,
        finished_at: row.get(19)?,
        wall_seconds: row.get(20)?,
        db_wait_seconds: row.get(34)?,
        contention: Contention {
            cpu_seconds: row.get(35)?,
            foreign_cpu_seconds: row.get(36)?,
            host_seconds: row.get(37)?,
            host_cpus: row.get(38)?,
            steal_seconds: row.get(39)?,
            load_start: row.get(40)?,
            load_end: row.get(41)?,
            cpu_mhz_min: row.get(42)?,
            cpu_mhz_max: row.get(43)?,
            swapped_pages: row.get(44)?,
            gpu_other_processes: row.get(45)?,
            runner_stall_seconds: row.get(49)?,
            // Written by lcx as JSON; a value it cannot read is unknown.
            foreign_processes: row
                .get::<_, Option<String>>("foreign_processes")?
                .and_then(|text| serde_json::from_str(&text).ok()),
        },
        rerun_note: row.get(46)?,
        cpus: row.get(47)?,
        problems: LineProblems {
            malformed: row.get(21)?,
            nonfinite: row.get(22)?,
            overlong: row.get(23)?,
            extra: row.get(48)?,
        },
        warmup: row.get(24)?,
        revision: row
            .get::<_, Option<String>>(25)?
            .map(|asked| -> rusqlite::Result<_> {
                Ok(RunRevision {
                    asked,
                    sha: row.get(26)?,
                    diff_sha256: row.get(27)?,
                    binary_version: row.get(28)?,
                })
            })
            .transpose()?,
        host: row.get(29)?,
        slurm_job: row.get(30)?,
        slurm_dir: row.get(31)?,
        slurm_run: row.get(33)?,
        node: None,
    };
    Ok((run, row.get(11)?, row.get(9)?, row.get(10)?, row.get(32)?))
}

fn finish_run(raw: RawRun) -> Result<Run, StoreError> {
    let (mut run, status, command, env, node) = raw;
    run.status = status.parse()?;
    run.node = node
        .map(|text| parse_json::<NodeInfo>("runs.node_json", Some(text)))
        .transpose()?;
    run.command = parse_json("runs.command_json", command)?;
    run.env = parse_json("runs.env_json", env)?;
    Ok(run)
}

fn stats_from_row(row: &Row<'_>, per_run: bool) -> rusqlite::Result<MetricStats> {
    Ok(MetricStats {
        experiment_id: row.get("experiment_id")?,
        arm: row.get("arm")?,
        run_id: if per_run { row.get("run_id")? } else { None },
        repeat: if per_run { row.get("repeat")? } else { None },
        name: row.get("name")?,
        n: row.get("n")?,
        mean: row.get("mean")?,
        min: row.get("min")?,
        max: row.get("max")?,
        variance: row.get("variance")?,
    })
}

impl Store {
    /// Every row of one statement, each made a value by `map`: the shape
    /// of most reads here, written once.
    fn rows<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, StoreError> {
        let mut stmt = self.conn.prepare(sql)?;
        let rows = stmt
            .query_map(params, map)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// A local cell's fastest CPU phase against its experiment's recorded
    /// ceiling: `(experiment, ceiling, ceiling's source, phase, rate)`;
    /// `None` when the run wrote no phase rate, the experiment has no
    /// ceiling, or the cell ran on a device (read against
    /// `peak/device_matmul_gflops`, not the host's FMA loop).
    pub fn fastest_phase(&self, run_id: i64) -> Result<Option<FastestPhase>, StoreError> {
        let row = self
            .conn
            .query_row(
                "SELECT r.experiment_id, e.peak_fp32_gflops, e.peak_source,
                    (SELECT MAX(value) FROM metrics WHERE run_id = r.id AND superseded = 0
                        AND name = 'perf/traversal_gflops'),
                    (SELECT MAX(value) FROM metrics WHERE run_id = r.id AND superseded = 0
                        AND name = 'perf/training_gflops'),
                    EXISTS (SELECT 1 FROM metrics WHERE run_id = r.id AND superseded = 0
                        AND name = 'peak/device_matmul_gflops')
                 FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE r.id = ?1",
                [run_id],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, Option<f64>>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, Option<f64>>(3)?,
                        r.get::<_, Option<f64>>(4)?,
                        r.get::<_, bool>(5)?,
                    ))
                },
            )
            .optional()?;
        let Some((experiment, Some(ceiling), source, traversal, training, false)) = row else {
            return Ok(None);
        };
        let fastest = [("traversal", traversal), ("training", training)]
            .into_iter()
            .filter_map(|(phase, rate)| Some((phase, rate?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        Ok(fastest.map(|(phase, rate)| FastestPhase {
            experiment,
            ceiling,
            source,
            phase,
            rate,
        }))
    }

    /// The best ceiling recorded for a host key (`host_peaks`).
    pub fn host_peak(
        &self,
        key: &crate::bench::peak::cache::HostKey,
    ) -> Result<Option<crate::bench::peak::cache::Ceiling>, StoreError> {
        use crate::bench::peak::cache::Ceiling;
        let row = self
            .conn
            .query_row(
                "SELECT isa, threads, fp32_gflops, fp32_gflops_core, stream_gbytes_per_second,
                    tries, spread, probed_at, checked_at, probes
                 FROM host_peaks WHERE hostname = ?1 AND boot_id = ?2 AND governor = ?3
                    AND cpu_model = ?4 AND cpus = ?5",
                params![
                    key.hostname,
                    key.boot_id,
                    key.governor,
                    key.cpu_model,
                    key.cpus
                ],
                |r| {
                    Ok(Ceiling {
                        key: key.clone(),
                        isa: r.get(0)?,
                        threads: r.get::<_, i64>(1)?.max(0) as usize,
                        gflops: r.get(2)?,
                        gflops_core: r.get(3)?,
                        stream_gbytes_per_second: r.get(4)?,
                        tries: r.get::<_, i64>(5)?.max(0) as usize,
                        spread: r.get(6)?,
                        probed_at: r.get(7)?,
                        checked_at: r.get(8)?,
                        probes: r.get::<_, i64>(9)?.clamp(0, i64::from(u32::MAX)) as u32,
                        // host_peaks holds clean probes only.
                        disturbed: false,
                    })
                },
            )
            .optional()?;
        Ok(row)
    }

    /// The experiment with this id.
    pub fn experiment(&self, id: i64) -> Result<Option<Experiment>, StoreError> {
        let sql = format!("SELECT {EXPERIMENT_COLUMNS} FROM experiments WHERE id = ?1");
        self.conn
            .query_row(&sql, [id], experiment_from_row)
            .optional()?
            .map(finish_experiment)
            .transpose()
    }

    /// The most recent experiment, or the most recent one with this name.
    pub fn latest_experiment(&self, name: Option<&str>) -> Result<Option<Experiment>, StoreError> {
        let sql = format!(
            "SELECT {EXPERIMENT_COLUMNS} FROM experiments
             WHERE ?1 IS NULL OR name = ?1 ORDER BY id DESC LIMIT 1"
        );
        self.conn
            .query_row(&sql, [name], experiment_from_row)
            .optional()?
            .map(finish_experiment)
            .transpose()
    }

    /// Resolves a user's experiment selector: a numeric id, `latest`, or a
    /// name (the latest experiment with that name).
    pub fn find_experiment(&self, selector: &str) -> Result<Experiment, StoreError> {
        let found = if selector == "latest" {
            self.latest_experiment(None)?
        } else if let Ok(id) = selector.parse::<i64>() {
            self.experiment(id)?
        } else if let Some(rev) = selector.strip_prefix("rev:").filter(|r| !r.is_empty()) {
            // The newest experiment with a cell at that revision (as asked,
            // or a prefix of its commit sha).
            let id: Option<i64> = self.conn.query_row(
                "SELECT MAX(experiment_id) FROM runs
                 WHERE revision = ?1 OR substr(revision_sha, 1, length(?1)) = ?1",
                [rev],
                |row| row.get(0),
            )?;
            match id {
                Some(id) => self.experiment(id)?,
                None => None,
            }
        } else {
            self.latest_experiment(Some(selector))?
        };
        found.ok_or_else(|| StoreError::ExperimentNotFound(selector.to_string()))
    }

    /// All experiments, newest first (optionally only those with a name).
    pub fn experiments(&self, name: Option<&str>) -> Result<Vec<Experiment>, StoreError> {
        let sql = format!(
            "SELECT {EXPERIMENT_COLUMNS} FROM experiments
             WHERE ?1 IS NULL OR name = ?1 ORDER BY id DESC"
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let raws = stmt
            .query_map([name], experiment_from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        raws.into_iter().map(finish_experiment).collect()
    }

    /// The cells of an experiment in plan order (arm, then repeat).
    pub fn runs(&self, experiment_id: i64) -> Result<Vec<Run>, StoreError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE experiment_id = ?1 ORDER BY arm_index, repeat"
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let raws = stmt
            .query_map([experiment_id], run_from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let runs: Vec<Run> = raws.into_iter().map(finish_run).collect::<Result<_, _>>()?;
        self.mark_abandoned(experiment_id, runs)
    }

    /// The `running` cells of an abandoned experiment read `abandoned`.
    fn mark_abandoned(
        &self,
        experiment_id: i64,
        mut runs: Vec<Run>,
    ) -> Result<Vec<Run>, StoreError> {
        if !runs.iter().any(|r| r.status == RunStatus::Running) {
            return Ok(runs);
        }
        let abandoned = self
            .experiment(experiment_id)?
            .is_some_and(|e| e.status == ExperimentStatus::Abandoned);
        if abandoned {
            for r in runs.iter_mut().filter(|r| r.status == RunStatus::Running) {
                r.status = RunStatus::Abandoned;
            }
        }
        Ok(runs)
    }

    /// Non-finite numeric fields of an experiment's live rows, as (run id,
    /// iteration, name, value), in run then iteration order.
    pub fn nonfinite_values(
        &self,
        experiment_id: i64,
    ) -> Result<Vec<(i64, i64, String, String)>, StoreError> {
        self.rows(
            "SELECT n.run_id, n.iteration, n.name, n.value FROM metric_nonfinite n
             JOIN runs r ON r.id = n.run_id
             WHERE r.experiment_id = ?1 AND n.superseded = 0
             ORDER BY n.run_id, n.name, n.iteration",
            [experiment_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
    }

    /// (arm, precision asked for, precision that ran), distinct, from the
    /// live `precision_requested` / `precision` text fields the trainer and
    /// `bench trainer` write on each line.
    pub fn precisions(
        &self,
        experiment_id: i64,
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        self.rows(
            "SELECT DISTINCT r.arm, asked.value, ran.value FROM runs r
             JOIN metric_text ran ON ran.run_id = r.id AND ran.name = 'precision'
                  AND ran.superseded = 0
             JOIN metric_text asked ON asked.run_id = r.id AND asked.name = 'precision_requested'
                  AND asked.superseded = 0 AND asked.iteration = ran.iteration
             WHERE r.experiment_id = ?1
             ORDER BY r.arm_index, asked.value, ran.value",
            [experiment_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
    }

    /// (arm, value), distinct, of one text field over an experiment's live
    /// lines, in arm order.
    pub fn text_values(
        &self,
        experiment_id: i64,
        name: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.rows(
            "SELECT DISTINCT r.arm, t.value FROM metric_text t
             JOIN runs r ON r.id = t.run_id
             WHERE r.experiment_id = ?1 AND t.name = ?2 AND t.superseded = 0
             ORDER BY r.arm_index, t.value",
            rusqlite::params![experiment_id, name],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    /// One run by id.
    pub fn run(&self, run_id: i64) -> Result<Option<Run>, StoreError> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1");
        let Some(run) = self
            .conn
            .query_row(&sql, [run_id], run_from_row)
            .optional()?
            .map(finish_run)
            .transpose()?
        else {
            return Ok(None);
        };
        let experiment_id = run.experiment_id;
        Ok(self.mark_abandoned(experiment_id, vec![run])?.pop())
    }

    /// A run's live values of one metric in iteration order, warm-up
    /// iterations included (filter with `iteration > experiment.warmup`).
    pub fn metric_series(&self, run_id: i64, name: &str) -> Result<Vec<(i64, f64)>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT iteration, value FROM metrics
             WHERE run_id = ?1 AND name = ?2 AND superseded = 0 ORDER BY iteration",
        )?;
        let rows = stmt
            .query_map(params![run_id, name], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// The first `limit` live values of one metric of a run, in iteration
    /// order (warm-up included): what warm-up detection looks at.
    pub fn metric_head(
        &self,
        run_id: i64,
        name: &str,
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT iteration, value FROM metrics
             WHERE run_id = ?1 AND name = ?2 AND superseded = 0 ORDER BY iteration LIMIT ?3",
        )?;
        let rows = stmt
            .query_map(params![run_id, name, limit as i64], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Every live numeric value of a run, by iteration then name.
    pub fn run_metrics(&self, run_id: i64) -> Result<Vec<MetricPoint>, StoreError> {
        self.rows(
            "SELECT iteration, name, value FROM metrics
             WHERE run_id = ?1 AND superseded = 0 ORDER BY iteration, name",
            [run_id],
            |r| {
                Ok(MetricPoint {
                    iteration: r.get(0)?,
                    name: r.get(1)?,
                    value: r.get(2)?,
                })
            },
        )
    }

    /// A run's live text fields (e.g. `mode`), as (iteration, name, value).
    pub fn run_texts(&self, run_id: i64) -> Result<Vec<(i64, String, String)>, StoreError> {
        self.rows(
            "SELECT iteration, name, value FROM metric_text
             WHERE run_id = ?1 AND superseded = 0 ORDER BY iteration, name",
            [run_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
    }

    /// Text values per arm and field name of an experiment's live lines:
    /// (arm, name, how many, the smallest value as an example), by arm and
    /// name. The report names those that look like dropped numbers.
    pub fn text_counts(
        &self,
        experiment_id: i64,
    ) -> Result<Vec<(String, String, i64, String)>, StoreError> {
        self.rows(
            "SELECT r.arm, t.name, COUNT(*), MIN(t.value) FROM metric_text t
             JOIN runs r ON r.id = t.run_id
             WHERE r.experiment_id = ?1 AND t.superseded = 0
             GROUP BY r.arm, t.name ORDER BY r.arm, t.name",
            [experiment_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
    }

    /// Names of all metrics recorded for an experiment, sorted.
    pub fn metric_names(&self, experiment_id: i64) -> Result<Vec<String>, StoreError> {
        self.rows(
            "SELECT DISTINCT m.name FROM metrics m JOIN runs r ON r.id = m.run_id
             WHERE r.experiment_id = ?1 AND m.superseded = 0 ORDER BY m.name",
            [experiment_id],
            |r| r.get(0),
        )
    }

    /// Warm-up-excluded per-run aggregates (view `run_metric_stats`).
    pub fn run_stats(&self, experiment_id: i64) -> Result<Vec<MetricStats>, StoreError> {
        self.rows(
            "SELECT * FROM run_metric_stats WHERE experiment_id = ?1
             ORDER BY run_id, name",
            [experiment_id],
            |r| stats_from_row(r, true),
        )
    }

    /// Warm-up-excluded per-arm aggregates over all repeats (view
    /// `arm_metric_stats`).
    pub fn arm_stats(&self, experiment_id: i64) -> Result<Vec<MetricStats>, StoreError> {
        self.rows(
            "SELECT * FROM arm_metric_stats WHERE experiment_id = ?1 ORDER BY arm, name",
            [experiment_id],
            |r| stats_from_row(r, false),
        )
    }

    /// One arm's aggregate of one metric across every experiment of a name,
    /// oldest first, paired with the experiment (for `lcx history`).
    pub fn arm_history(
        &self,
        experiment_name: &str,
        arm: &str,
        metric: &str,
    ) -> Result<Vec<(Experiment, MetricStats)>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT s.* FROM arm_metric_stats s JOIN experiments e ON e.id = s.experiment_id
             WHERE e.name = ?1 AND s.arm = ?2 AND s.name = ?3 ORDER BY e.id",
        )?;
        let stats = stmt
            .query_map(params![experiment_name, arm, metric], |r| {
                stats_from_row(r, false)
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(stats.len());
        for s in stats {
            if let Some(e) = self.experiment(s.experiment_id)? {
                out.push((e, s));
            }
        }
        Ok(out)
    }

    /// Reports recorded for an experiment, oldest first.
    pub fn reports(&self, experiment_id: i64) -> Result<Vec<ReportRecord>, StoreError> {
        self.rows(
            "SELECT id, experiment_id, path, sha256, format, created_at FROM reports
             WHERE experiment_id = ?1 ORDER BY id",
            [experiment_id],
            |r| {
                Ok(ReportRecord {
                    id: r.get(0)?,
                    experiment_id: r.get(1)?,
                    path: r.get(2)?,
                    sha256: r.get(3)?,
                    format: r.get(4)?,
                    created_at: r.get(5)?,
                })
            },
        )
    }

    /// [`Store::query`], interrupted once it has run `limit` (`None`: no
    /// limit): a statement typed by hand may never end (a recursive CTE
    /// without a stop), and holds the database while it runs. A statement
    /// stopped so ends in [`StoreError::Interrupted`].
    pub fn query_within(
        &mut self,
        sql: &str,
        limit: Option<Duration>,
    ) -> Result<QueryResult, StoreError> {
        let Some(limit) = limit else {
            return self.query(sql);
        };
        let start = Instant::now();
        // SQLite calls the handler every this many virtual-machine steps
        // (well under a millisecond), so the statement ends soon after the
        // limit; a `true` makes the running step fail with SQLITE_INTERRUPT.
        const STEPS: std::ffi::c_int = 10_000;
        self.conn
            .progress_handler(STEPS, Some(move || start.elapsed() >= limit))?;
        let result = self.read_only_statement(sql);
        // Removed before `query_only` is turned off: past the limit the
        // handler would interrupt that too, and leave the connection
        // refusing writes.
        self.conn.progress_handler(0, None::<fn() -> bool>)?;
        self.conn.pragma_update(None, "query_only", "OFF")?;
        result.map_err(|e| match e {
            StoreError::Sql(rusqlite::Error::SqliteFailure(f, _))
                if f.code == rusqlite::ErrorCode::OperationInterrupted =>
            {
                StoreError::Interrupted { after: limit }
            }
            other => other,
        })
    }

    /// Runs one read-only SQL statement (for `lcx query`). Statements that
    /// would write are refused before they run, and the connection is put
    /// in `query_only` mode meanwhile as a second guard.
    pub fn query(&self, sql: &str) -> Result<QueryResult, StoreError> {
        let result = self.read_only_statement(sql);
        self.conn.pragma_update(None, "query_only", "OFF")?;
        result
    }

    /// Runs `sql` if it cannot write, with `query_only` on; the caller turns
    /// it off again.
    fn read_only_statement(&self, sql: &str) -> Result<QueryResult, StoreError> {
        let mut stmt = self.conn.prepare(sql)?;
        if !stmt.readonly() {
            return Err(StoreError::NotReadOnly(sql.trim().to_string()));
        }
        self.conn.pragma_update(None, "query_only", "ON")?;
        (|| {
            let columns: Vec<String> = stmt.column_names().map(str::to_string).collect();
            let width = columns.len();
            let mut rows = Vec::new();
            let mut cursor = stmt.query([])?;
            while let Some(row) = cursor.next()? {
                let mut values = Vec::with_capacity(width);
                for i in 0..width {
                    values.push(match row.get_ref(i)? {
                        ValueRef::Null => SqlValue::Null,
                        ValueRef::Integer(v) => SqlValue::Integer(v),
                        ValueRef::Real(v) => SqlValue::Real(v),
                        ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into()),
                        ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
                    });
                }
                rows.push(values);
            }
            Ok::<_, StoreError>(QueryResult { columns, rows })
        })()
    }
}
