//! Writes: experiments, cells, metric lines, reports. Every write is its own
//! `BEGIN IMMEDIATE` transaction, so another lcx process on the same file
//! waits on the busy timeout instead of failing half-way.

use std::time::{Duration, Instant};

use rusqlite::{params, ErrorCode, Transaction, TransactionBehavior};

use super::types::*;
use super::{Liveness, Store, StoreError};

/// A runner's claim on an experiment: the epoch its claim set. Every write
/// for the experiment checks it in its own transaction, so a runner that
/// was taken over (a newer claim) cannot write another row.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fence {
    experiment_id: i64,
    epoch: i64,
}

/// `Err(TakenOver)` when the experiment's epoch is no longer `fence`'s;
/// `Err(Removed)` when the experiment is gone (`lcx rm --force` from a
/// host that could not see this runner).
fn check_fence(conn: &rusqlite::Connection, fence: Fence) -> Result<(), StoreError> {
    use rusqlite::OptionalExtension;
    type Claim = (i64, Option<i64>, Option<String>, Option<String>);
    let row: Option<Claim> = conn
        .query_row(
            "SELECT runner_epoch, runner_pid, runner_host, runner_claimed_at
             FROM experiments WHERE id = ?1",
            [fence.experiment_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    let Some((epoch, pid, host, at)) = row else {
        return Err(StoreError::Removed {
            id: fence.experiment_id,
        });
    };
    if epoch == fence.epoch {
        return Ok(());
    }
    let mut by = format!(
        "{} pid {}",
        host.as_deref().unwrap_or("(unknown host)"),
        pid.map_or_else(|| "?".to_string(), |p| p.to_string())
    );
    if let Some(at) = at {
        by.push_str(&format!(" at {at}"));
    }
    Err(StoreError::TakenOver {
        id: fence.experiment_id,
        by,
    })
}

/// The name of experiment `id`, unless it is live: a runner alive on this
/// host is always refused; one that cannot be checked from here (another
/// host) or a detached experiment (its Slurm jobs may run) only without
/// `force` (`forced` says what the flag does). `lcx rm` and `lcx rename`
/// judge a row by this one rule.
fn refuse_live(
    tx: &rusqlite::Transaction<'_>,
    id: i64,
    force: bool,
    forced: &str,
) -> Result<String, StoreError> {
    let (name, status, detached, pid, host, boot, ticks): (
        String,
        String,
        Option<String>,
        Option<i64>,
        _,
        _,
        _,
    ) = tx.query_row(
        "SELECT name, status, detached_at, runner_pid, runner_host, runner_boot_id,
                runner_start_ticks
         FROM experiments WHERE id = ?1",
        [id],
        |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        },
    )?;
    let holder = super::read::runner_identity(pid, host, boot, ticks);
    // The status readers see (`lcx list`): a gone runner's `running` row is
    // abandoned, one left to its Slurm jobs detached.
    let what =
        match super::read::effective_status(status.parse()?, holder.as_ref(), detached.is_some()) {
            ExperimentStatus::Running => match &holder {
                Some(h) if h.liveness() == Liveness::Alive => {
                    return Err(StoreError::StillRunning {
                        id,
                        holder: format!("is being run by lcx {}", h.describe()),
                    })
                }
                Some(h) => Some(format!(
                    "run by lcx {}, which cannot be checked from here",
                    h.describe()
                )),
                None => Some("running, with no runner recorded".to_string()),
            },
            ExperimentStatus::Detached => {
                Some("detached: its Slurm jobs may still run".to_string())
            }
            _ => None,
        };
    if let (Some(what), false) = (what, force) {
        return Err(StoreError::StillRunning {
            id,
            holder: format!("is {what}; {forced}"),
        });
    }
    Ok(name)
}

/// A place `scripts/fault-kill9.sh` kills the runner at, deterministically
/// rather than by timing luck: with `LCX_FAULT_PAUSE` naming this `point`,
/// lcx writes its pid to the file `LCX_FAULT_READY` names and waits there
/// (inside the creation transaction, for the first two points) to be
/// killed; it goes on after 60 s. Unset, it costs one environment look-up
/// per experiment created.
fn fault_point(point: &str) {
    if std::env::var_os("LCX_FAULT_PAUSE").is_some_and(|p| p == point) {
        if let Some(ready) = std::env::var_os("LCX_FAULT_READY") {
            let _ = std::fs::write(ready, std::process::id().to_string());
        }
        std::thread::sleep(Duration::from_secs(60));
    }
}

const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

fn to_json<T: serde::Serialize>(value: &T) -> String {
    // Serialising strings, string maps and plain structs cannot fail.
    serde_json::to_string(value).unwrap_or_default()
}

/// The experiment's row, inside the caller's transaction.
fn insert_experiment_row(
    tx: &rusqlite::Transaction<'_>,
    e: &NewExperiment,
) -> Result<i64, StoreError> {
    let fp = &e.fingerprint;
    tx.execute(
        "INSERT INTO experiments (
            name, description, workload, file_path, file_text, file_sha256, plan_json,
            iterations, warmup, repeats, baseline, status, lcx_version, git_commit,
            git_dirty, command_line, runner_pid, hostname, os, cpu_model, cpu_cores,
            memory_bytes, gpu_name, gpu_driver, cuda_version, cuda_available,
            torch_version, torch_intra_threads, torch_inter_threads, fingerprint_json,
            runner_host, runner_boot_id, runner_start_ticks, peak_isa, peak_fp32_gflops_core,
            peak_fp32_gflops, peak_stream_gbytes_per_second, peak_source, peak_tries,
            peak_spread, peak_probed_at, peak_note)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'running', ?12, ?13, ?14,
            ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29,
            ?30, ?31, ?32, ?33, ?34, ?35, ?36, ?37, ?38, ?39, ?40, ?41)",
        params![
            e.name,
            e.description,
            e.workload,
            e.file_path,
            e.file_text,
            e.file_sha256,
            e.plan_json,
            e.iterations,
            e.warmup,
            e.repeats,
            e.baseline,
            e.lcx_version,
            e.git_commit,
            e.git_dirty,
            to_json(&e.command_line),
            e.runner.as_ref().map(|r| r.pid),
            fp.hostname,
            fp.os,
            fp.cpu_model,
            fp.cpu_cores,
            fp.memory_bytes,
            fp.gpu_name,
            fp.gpu_driver,
            fp.cuda_version,
            fp.cuda_available,
            fp.torch_version,
            fp.torch_intra_threads,
            fp.torch_inter_threads,
            to_json(fp),
            e.runner.as_ref().and_then(|r| r.host.clone()),
            e.runner.as_ref().and_then(|r| r.boot_id.clone()),
            e.runner.as_ref().and_then(|r| r.start_ticks.clone()),
            fp.peak_isa,
            fp.peak_fp32_gflops_core,
            fp.peak_fp32_gflops,
            fp.peak_stream_gbytes_per_second,
            fp.peak_source,
            fp.peak_tries,
            fp.peak_spread,
            fp.peak_probed_at,
            fp.peak_note,
        ],
    )?;
    Ok(tx.last_insert_rowid())
}

/// Cells' rows, inside the caller's transaction.
fn insert_run_rows(
    tx: &rusqlite::Transaction<'_>,
    experiment_id: i64,
    runs: &[NewRun],
) -> Result<Vec<i64>, StoreError> {
    let mut ids = Vec::with_capacity(runs.len());
    let mut stmt = tx.prepare(
        "INSERT INTO runs (experiment_id, arm, arm_label, arm_index, repeat,
                config_toml, config_sha256, command_json, env_json,
                revision, revision_sha, revision_diff_sha256, binary_version)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?;
    for r in runs {
        stmt.execute(params![
            experiment_id,
            r.arm,
            r.arm_label,
            r.arm_index,
            r.repeat,
            r.config_toml,
            r.config_sha256,
            to_json(&r.command),
            to_json(&r.env),
            r.revision.as_ref().map(|v| &v.asked),
            r.revision.as_ref().and_then(|v| v.sha.as_ref()),
            r.revision.as_ref().and_then(|v| v.diff_sha256.as_ref()),
            r.revision.as_ref().and_then(|v| v.binary_version.as_ref()),
        ])?;
        ids.push(tx.last_insert_rowid());
    }
    Ok(ids)
}

impl Store {
    /// Begins a write (`BEGIN IMMEDIATE`): waits for the write lock, adds the
    /// wait to [`Store::lock_wait`], and checks this process's claim on its
    /// experiment inside the transaction.
    fn begin(&mut self) -> Result<Transaction<'_>, StoreError> {
        let asked = Instant::now();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        self.lock_wait += asked.elapsed();
        if let Some(fence) = self.fence {
            check_fence(&tx, fence)?;
        }
        Ok(tx)
    }

    /// One statement as its own fenced write.
    fn write(&mut self, sql: &str, params: impl rusqlite::Params) -> Result<usize, StoreError> {
        let tx = self.begin()?;
        let changed = tx.execute(sql, params)?;
        tx.commit()?;
        Ok(changed)
    }

    /// How long this store has waited for the database's write lock, in
    /// total: the runner takes the difference over a cell.
    pub fn lock_wait(&self) -> Duration {
        self.lock_wait
    }

    /// `Err(StoreError::TakenOver)` when another runner has claimed the
    /// experiment this store's runner holds since it claimed it; `Ok` when
    /// it still holds it or holds none. A read: a runner polls it while a
    /// cell is silent.
    pub fn check_claim(&self) -> Result<(), StoreError> {
        match self.fence {
            Some(fence) => check_fence(&self.conn, fence),
            None => Ok(()),
        }
    }

    /// Records a new experiment with status `running` and its cells, all
    /// `pending` in plan order, in one transaction: a runner killed while
    /// recording leaves either all of it or nothing, never an experiment
    /// without its cells. Returns its id.
    pub fn insert_experiment(
        &mut self,
        e: &NewExperiment,
        runs: &[NewRun],
    ) -> Result<i64, StoreError> {
        let tx = self.begin()?;
        let id = insert_experiment_row(&tx, e)?;
        fault_point("create-row");
        insert_run_rows(&tx, id, runs)?;
        fault_point("create-cells");
        tx.commit()?;
        fault_point("create-committed");
        Ok(id)
    }

    /// Records cells of an experiment as `pending`, in plan order (the
    /// cells of an experiment an older lcx recorded without them); returns
    /// their run ids in the same order.
    pub fn insert_runs(
        &mut self,
        experiment_id: i64,
        runs: &[NewRun],
    ) -> Result<Vec<i64>, StoreError> {
        let tx = self.begin()?;
        let ids = insert_run_rows(&tx, experiment_id, runs)?;
        tx.commit()?;
        Ok(ids)
    }

    /// Sets an experiment's status; a final status also stamps `finished_at`.
    pub fn set_experiment_status(
        &mut self,
        experiment_id: i64,
        status: ExperimentStatus,
    ) -> Result<(), StoreError> {
        let sql = format!(
            "UPDATE experiments SET status = ?1,
                finished_at = CASE WHEN ?1 = 'running' THEN NULL ELSE {NOW} END,
                detached_at = CASE WHEN ?1 = 'running' THEN detached_at ELSE NULL END
             WHERE id = ?2"
        );
        self.write(&sql, params![status.as_str(), experiment_id])?;
        Ok(())
    }

    /// Makes `runner` the process that holds the experiment, in one
    /// `BEGIN IMMEDIATE` transaction, so of two runners resuming the same
    /// experiment exactly one gets it. Refused while the recorded runner is
    /// alive ([`StoreError::Taken`]) or, with `takeover` false, when it ran
    /// on another host and cannot be checked ([`StoreError::TakenElsewhere`]).
    /// The claim increments the experiment's epoch: the runner it replaces
    /// (a `--takeover` of one that was in fact alive) finds its next write
    /// refused with [`StoreError::TakenOver`].
    pub fn claim_experiment(
        &mut self,
        experiment_id: i64,
        runner: &super::RunnerIdentity,
        takeover: bool,
    ) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (status, pid, host, boot, ticks): (String, Option<i64>, _, _, _) = tx.query_row(
            "SELECT status, runner_pid, runner_host, runner_boot_id, runner_start_ticks
             FROM experiments WHERE id = ?1",
            [experiment_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )?;
        let holder = super::read::runner_identity(pid, host, boot, ticks);
        if let Some(holder) = holder.filter(|h| h != runner) {
            match holder.liveness() {
                Liveness::Alive => {
                    return Err(StoreError::Taken {
                        id: experiment_id,
                        holder: holder.describe(),
                    })
                }
                // A `running` row from a host we cannot see may still be in
                // progress there; any other status says that runner ended.
                Liveness::Unknown if status == "running" && !takeover => {
                    return Err(StoreError::TakenElsewhere {
                        id: experiment_id,
                        holder: holder.describe(),
                    })
                }
                Liveness::Unknown | Liveness::Gone => {}
            }
        }
        let sql = format!(
            "UPDATE experiments SET runner_pid = ?1, runner_host = ?2, runner_boot_id = ?3,
                runner_start_ticks = ?4, runner_epoch = runner_epoch + 1,
                runner_claimed_at = {NOW}
             WHERE id = ?5 RETURNING runner_epoch"
        );
        let epoch = tx.query_row(
            &sql,
            params![
                runner.pid,
                runner.host,
                runner.boot_id,
                runner.start_ticks,
                experiment_id
            ],
            |r| r.get(0),
        )?;
        tx.commit()?;
        // From here on every write for the experiment checks that no later
        // claim (a --takeover elsewhere) has replaced this one.
        self.fence = Some(Fence {
            experiment_id,
            epoch,
        });
        Ok(())
    }

    /// Marks a cell `running` and returns the attempt number its metric
    /// rows must carry. A cell that ran before (failed, interrupted, or left
    /// `running` by a killed runner) gets a new attempt, and the rows of its
    /// earlier attempts are marked superseded, in the same transaction.
    pub fn start_run(&mut self, run_id: i64) -> Result<i64, StoreError> {
        let tx = self.begin()?;
        tx.execute(
            "UPDATE metrics SET superseded = 1 WHERE run_id = ?1 AND superseded = 0",
            [run_id],
        )?;
        tx.execute(
            "UPDATE metric_text SET superseded = 1 WHERE run_id = ?1 AND superseded = 0",
            [run_id],
        )?;
        tx.execute(
            "UPDATE metric_nonfinite SET superseded = 1 WHERE run_id = ?1 AND superseded = 0",
            [run_id],
        )?;
        let sql = format!(
            "UPDATE runs SET
                attempt = CASE WHEN status = 'pending' THEN attempt ELSE attempt + 1 END,
                status = 'running', skip_reason = NULL, exit_code = NULL, signal = NULL,
                error = NULL, stderr_tail = NULL, iterations_done = 0,
                malformed_lines = 0, nonfinite_values = 0, overlong_lines = 0, extra_lines = 0,
                warmup = NULL,
                started_at = {NOW}, finished_at = NULL, wall_seconds = NULL,
                host = NULL, slurm_job = NULL, slurm_dir = NULL, slurm_run = NULL,
                node_json = NULL, db_wait_seconds = NULL, cpu_seconds = NULL,
                foreign_cpu_seconds = NULL, host_seconds = NULL, host_cpus = NULL,
                steal_seconds = NULL, load_start = NULL, load_end = NULL, cpu_mhz_min = NULL,
                cpu_mhz_max = NULL, swapped_pages = NULL, gpu_other_processes = NULL,
                runner_stall_seconds = NULL, rerun_note = NULL, cpus = NULL,
                foreign_processes = NULL
             WHERE id = ?1"
        );
        tx.execute(&sql, [run_id])?;
        let attempt = tx.query_row("SELECT attempt FROM runs WHERE id = ?1", [run_id], |r| {
            r.get(0)
        })?;
        tx.commit()?;
        Ok(attempt)
    }

    /// Writes one metric line (all its fields) in one transaction and counts
    /// it on the run. A second value for an (iteration, name) already live
    /// in this run is refused with [`StoreError::DuplicateIteration`] and
    /// nothing of the line is written.
    pub fn insert_line(
        &mut self,
        run_id: i64,
        attempt: i64,
        iteration: i64,
        numbers: &[(String, f64)],
        texts: &[(String, String)],
    ) -> Result<(), StoreError> {
        let line = MetricLine {
            iteration,
            numbers: numbers.to_vec(),
            texts: texts.to_vec(),
            nonfinite: Vec::new(),
        };
        self.insert_lines(run_id, attempt, std::slice::from_ref(&line))
    }

    /// Writes several metric lines in one transaction (all or nothing) and
    /// counts them on the run. The runner passes the lines that had already
    /// arrived together, so a slow child still gets one transaction per line.
    pub fn insert_lines(
        &mut self,
        run_id: i64,
        attempt: i64,
        lines: &[MetricLine],
    ) -> Result<(), StoreError> {
        if lines.is_empty() {
            return Ok(());
        }
        let tx = self.begin()?;
        let duplicate =
            |err: rusqlite::Error, iteration: i64, name: &str| match err.sqlite_error_code() {
                Some(ErrorCode::ConstraintViolation) => StoreError::DuplicateIteration {
                    run_id,
                    iteration,
                    name: name.to_string(),
                },
                _ => StoreError::Sql(err),
            };
        {
            let mut numbers = tx.prepare_cached(
                "INSERT INTO metrics (run_id, attempt, iteration, name, value)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            let mut texts = tx.prepare_cached(
                "INSERT INTO metric_text (run_id, attempt, iteration, name, value)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            let mut nonfinite = tx.prepare_cached(
                "INSERT INTO metric_nonfinite (run_id, attempt, iteration, name, value)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for line in lines {
                let iteration = line.iteration;
                for (name, value) in &line.numbers {
                    numbers
                        .execute(params![run_id, attempt, iteration, name, value])
                        .map_err(|e| duplicate(e, iteration, name))?;
                }
                for (name, value) in &line.texts {
                    texts
                        .execute(params![run_id, attempt, iteration, name, value])
                        .map_err(|e| duplicate(e, iteration, name))?;
                }
                for (name, value) in &line.nonfinite {
                    nonfinite
                        .execute(params![run_id, attempt, iteration, name, value.as_str()])
                        .map_err(|e| duplicate(e, iteration, name))?;
                }
            }
        }
        tx.prepare_cached("UPDATE runs SET iterations_done = iterations_done + ?1 WHERE id = ?2")?
            .execute(params![lines.len() as i64, run_id])?;
        tx.commit()?;
        Ok(())
    }

    /// Records how a cell ended.
    pub fn finish_run(&mut self, run_id: i64, outcome: &RunOutcome) -> Result<(), StoreError> {
        let sql = format!(
            "UPDATE runs SET status = ?1, exit_code = ?2, signal = ?3, error = ?4,
                stderr_tail = ?5, wall_seconds = ?6, finished_at = {NOW},
                malformed_lines = ?8, nonfinite_values = ?9, overlong_lines = ?10,
                db_wait_seconds = ?11, extra_lines = ?12
             WHERE id = ?7"
        );
        self.write(
            &sql,
            params![
                outcome.status.as_str(),
                outcome.exit_code,
                outcome.signal,
                outcome.error,
                outcome.stderr_tail,
                outcome.wall_seconds,
                run_id,
                outcome.problems.malformed,
                outcome.problems.nonfinite,
                outcome.problems.overlong,
                outcome.db_wait_seconds,
                outcome.problems.extra,
            ],
        )?;
        Ok(())
    }

    /// Records the warm-up detected for a cell (`warmup = "auto"`).
    pub fn set_run_warmup(&mut self, run_id: i64, warmup: i64) -> Result<(), StoreError> {
        self.write(
            "UPDATE runs SET warmup = ?1 WHERE id = ?2",
            params![warmup, run_id],
        )?;
        Ok(())
    }

    /// Where a cell runs: its host, and its Slurm job when it is one.
    pub fn set_run_placement(
        &mut self,
        run_id: i64,
        host: Option<&str>,
        slurm_job: Option<&str>,
    ) -> Result<(), StoreError> {
        self.write(
            "UPDATE runs SET host = COALESCE(?1, host), slurm_job = COALESCE(?2, slurm_job)
             WHERE id = ?3",
            params![host, slurm_job, run_id],
        )?;
        Ok(())
    }

    /// The job's folder of a Slurm cell (what a later `--attach` follows).
    pub fn set_run_slurm_dir(&mut self, run_id: i64, dir: &str) -> Result<(), StoreError> {
        self.write(
            "UPDATE runs SET slurm_dir = ?1 WHERE id = ?2",
            params![dir, run_id],
        )?;
        Ok(())
    }

    /// The run of a cell's job whose lines the cell holds (its `started`
    /// record).
    pub fn set_run_slurm_run(&mut self, run_id: i64, started: &str) -> Result<(), StoreError> {
        self.write(
            "UPDATE runs SET slurm_run = ?1 WHERE id = ?2",
            params![started, run_id],
        )?;
        Ok(())
    }

    /// What the host was doing while a cell ran.
    pub fn set_run_contention(
        &mut self,
        run_id: i64,
        c: &super::Contention,
    ) -> Result<(), StoreError> {
        let foreign = c
            .foreign_processes
            .as_ref()
            .map(|list| serde_json::to_string(list).unwrap_or_else(|_| "[]".into()));
        self.write(
            "UPDATE runs SET cpu_seconds = ?1, foreign_cpu_seconds = ?2, host_seconds = ?3,
                host_cpus = ?4, steal_seconds = ?5, load_start = ?6, load_end = ?7,
                cpu_mhz_min = ?8, cpu_mhz_max = ?9, swapped_pages = ?10,
                gpu_other_processes = ?11, runner_stall_seconds = ?12, foreign_processes = ?13
             WHERE id = ?14",
            params![
                c.cpu_seconds,
                c.foreign_cpu_seconds,
                c.host_seconds,
                c.host_cpus,
                c.steal_seconds,
                c.load_start,
                c.load_end,
                c.cpu_mhz_min,
                c.cpu_mhz_max,
                c.swapped_pages,
                c.gpu_other_processes,
                c.runner_stall_seconds,
                foreign,
                run_id
            ],
        )?;
        Ok(())
    }

    /// Keeps `c` as its host key's best ceiling (`host_peaks`).
    pub fn save_host_peak(
        &mut self,
        c: &crate::bench::peak::cache::Ceiling,
    ) -> Result<(), StoreError> {
        self.write(
            "INSERT OR REPLACE INTO host_peaks (hostname, boot_id, governor, cpu_model, cpus,
                isa, threads, fp32_gflops, fp32_gflops_core, stream_gbytes_per_second, tries,
                spread, probed_at, checked_at, probes)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            params![
                c.key.hostname,
                c.key.boot_id,
                c.key.governor,
                c.key.cpu_model,
                c.key.cpus,
                c.isa,
                c.threads as i64,
                c.gflops,
                c.gflops_core,
                c.stream_gbytes_per_second,
                c.tries as i64,
                c.spread,
                c.probed_at,
                c.checked_at,
                i64::from(c.probes),
            ],
        )?;
        Ok(())
    }

    /// An experiment's ceiling after the runner probed again because a
    /// phase ran faster than the recorded one (`note` says so).
    pub fn set_experiment_peak(
        &mut self,
        experiment_id: i64,
        c: Option<&crate::bench::peak::cache::Ceiling>,
        source: &str,
        note: &str,
    ) -> Result<(), StoreError> {
        let Some(c) = c else {
            self.write(
                "UPDATE experiments SET peak_source = ?1, peak_note = ?2 WHERE id = ?3",
                params![source, note, experiment_id],
            )?;
            return Ok(());
        };
        // The ceiling's measurements bound as in `save_host_peak`, but into
        // experiments' own column names: the statements share values only.
        self.write(
            "UPDATE experiments SET peak_fp32_gflops = ?1, peak_fp32_gflops_core = ?2,
                peak_stream_gbytes_per_second = ?3, peak_tries = ?4, peak_spread = ?5,
                peak_probed_at = ?6, peak_source = ?7, peak_note = ?8
             WHERE id = ?9",
            params![
                c.gflops,
                c.gflops_core,
                c.stream_gbytes_per_second,
                c.tries as i64,
                c.spread,
                c.probed_at,
                source,
                note,
                experiment_id
            ],
        )?;
        Ok(())
    }

    /// The CPUs a cell's process was allowed to run on (its affinity).
    pub fn set_run_cpus(&mut self, run_id: i64, cpus: &str) -> Result<(), StoreError> {
        self.write(
            "UPDATE runs SET cpus = ?1 WHERE id = ?2",
            params![cpus, run_id],
        )?;
        Ok(())
    }

    /// Why the runner runs a cell's new attempt (a rerun for contention).
    pub fn set_run_rerun_note(&mut self, run_id: i64, note: &str) -> Result<(), StoreError> {
        self.write(
            "UPDATE runs SET rerun_note = ?1 WHERE id = ?2",
            params![note, run_id],
        )?;
        Ok(())
    }

    /// The hardware a cell ran on.
    pub fn set_run_node(&mut self, run_id: i64, node: &super::NodeInfo) -> Result<(), StoreError> {
        let json = serde_json::to_string(node).map_err(|e| StoreError::BadValue {
            column: "runs.node_json",
            value: e.to_string(),
        })?;
        self.write(
            "UPDATE runs SET node_json = ?1 WHERE id = ?2",
            params![json, run_id],
        )?;
        Ok(())
    }

    /// Leaves a running experiment to its submitted Slurm jobs: no runner
    /// holds it, and readers show it `detached` until a coordinator
    /// attaches and it ends.
    pub fn detach_experiment(&mut self, experiment_id: i64) -> Result<(), StoreError> {
        let sql = format!(
            "UPDATE experiments SET detached_at = {NOW}, runner_pid = NULL, runner_host = NULL,
                runner_boot_id = NULL, runner_start_ticks = NULL
             WHERE id = ?1 AND status = 'running'"
        );
        self.write(&sql, [experiment_id])?;
        Ok(())
    }

    /// Removes experiments with every row that belongs to them (cells,
    /// metric lines, text and non-finite values; recorded reports keep their
    /// row without the experiment), in one transaction: all of them or none.
    /// A `running` experiment whose runner is alive is refused
    /// ([`StoreError::StillRunning`]); one whose runner cannot be checked
    /// from here (another host, a detached Slurm run) only with `force`.
    /// With `dry_run` nothing changes and the counts say what would go.
    pub fn remove_experiments(
        &mut self,
        ids: &[i64],
        force: bool,
        dry_run: bool,
    ) -> Result<Removal, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut removal = Removal::default();
        for &id in ids {
            let name = refuse_live(&tx, id, force, "--force removes it anyway")?;
            let count = |sql: &str| -> Result<i64, StoreError> {
                Ok(tx.query_row(sql, [id], |r| r.get(0))?)
            };
            removal.runs += count("SELECT COUNT(*) FROM runs WHERE experiment_id = ?1")?;
            removal.metric_rows += count(
                "SELECT (SELECT COUNT(*) FROM metrics m JOIN runs r ON r.id = m.run_id
                         WHERE r.experiment_id = ?1)
                      + (SELECT COUNT(*) FROM metric_text m JOIN runs r ON r.id = m.run_id
                         WHERE r.experiment_id = ?1)
                      + (SELECT COUNT(*) FROM metric_nonfinite m JOIN runs r ON r.id = m.run_id
                         WHERE r.experiment_id = ?1)",
            )?;
            removal.experiments.push((id, name));
            tx.execute("DELETE FROM experiments WHERE id = ?1", [id])?;
        }
        if dry_run {
            tx.rollback()?;
        } else {
            tx.commit()?;
        }
        Ok(removal)
    }

    /// Gives experiments another name (`lcx rename`), in one transaction.
    /// A live experiment is refused as `lcx rm` refuses it (its runner
    /// would go on giving its cells the old `LCX_EXPERIMENT`); `force`
    /// renames one whose runner cannot be checked from here.
    pub fn rename_experiments(
        &mut self,
        ids: &[i64],
        name: &str,
        force: bool,
    ) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        for &id in ids {
            refuse_live(&tx, id, force, "--force renames it anyway")?;
            tx.execute(
                "UPDATE experiments SET name = ?1 WHERE id = ?2",
                params![name, id],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Marks a cell `skipped` with the reason shown to the user.
    pub fn skip_run(&mut self, run_id: i64, reason: &str) -> Result<(), StoreError> {
        let sql = format!(
            "UPDATE runs SET status = 'skipped', skip_reason = ?1, finished_at = {NOW}
             WHERE id = ?2"
        );
        self.write(&sql, params![reason, run_id])?;
        Ok(())
    }

    /// Records a report file written for an experiment; returns its id.
    pub fn insert_report(
        &mut self,
        experiment_id: Option<i64>,
        path: &str,
        sha256: &str,
        format: &str,
    ) -> Result<i64, StoreError> {
        self.conn.execute(
            "INSERT INTO reports (experiment_id, path, sha256, format) VALUES (?1, ?2, ?3, ?4)",
            params![experiment_id, path, sha256, format],
        )?;
        Ok(self.conn.last_insert_rowid())
    }
}
