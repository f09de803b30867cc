//! Read-side queries for `lcx report`, `history`, `compare`, `list` and
//! `query` (owned by the report side; the rest of the store is in read.rs /
//! write.rs).
//!
//! The store reads; the report computes. Series come out one (cell,
//! metric) range scan at a time, warm-up already split off
//! ([`Store::for_each_series`]), for `report::moments` to fold; plots get
//! each cell's raw points; `lcx history` gets per-run sums from SQL, whose
//! GROUP BY over one arm's few runs is cheap.

use std::path::Path;

use rusqlite::types::Value;
use rusqlite::{params_from_iter, OptionalExtension};

use super::types::ExperimentStatus;
use super::{Store, StoreError};

/// Warm-up-excluded moments of one metric in one run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunMoments {
    pub run_id: i64,
    pub arm: String,
    pub repeat: i64,
    pub name: String,
    /// Iterations after the warm-up.
    pub n: i64,
    pub sum: f64,
    pub sum_sq: f64,
    /// NaN when n = 0.
    pub min: f64,
    pub max: f64,
    /// Live iterations of this metric that the warm-up excluded.
    pub excluded: i64,
}

impl RunMoments {
    /// The run's warm-up-excluded mean (NaN when n = 0).
    pub fn mean(&self) -> f64 {
        self.sum / self.n as f64
    }
}

/// One cell's live values of one metric after the warm-up that applies to
/// it (the cell's detected one, else the experiment's), in iteration order,
/// with the number of live values the warm-up excluded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CellSeries<'a> {
    pub run_id: i64,
    pub arm: &'a str,
    pub repeat: i64,
    pub name: &'a str,
    pub values: &'a [f64],
    pub excluded: i64,
}

/// One stored value of one metric at one iteration of one cell (warm-up
/// included: plots shade it).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IterationPoint {
    pub arm: String,
    pub run_id: i64,
    pub repeat: i64,
    pub name: String,
    pub iteration: i64,
    pub value: f64,
}

/// One line of `lcx list`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ListRow {
    pub id: i64,
    pub name: String,
    pub created_at: String,
    pub status: String,
    pub workload: String,
    /// The host name the experiment ran on: the one a user set
    /// (`LCX_HOSTNAME`) or the machine's (`experiments.hostname`).
    pub host: Option<String>,
    /// Arm names in plan order.
    pub arms: Vec<String>,
    pub cells: i64,
    pub completed: i64,
    pub failed: i64,
    /// Stopped by a Ctrl-C, a signal or the scheduler: a resume runs them
    /// again; nothing in them failed.
    pub interrupted: i64,
    pub skipped: i64,
}

/// One run of an arm in one experiment, for `lcx history`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HistoryRun {
    pub experiment_id: i64,
    pub run_id: i64,
    pub arm: String,
    pub repeat: i64,
    pub status: String,
    /// The run's moments of the metric asked for, once
    /// `report::moments::history_moments` has folded them; `None` when it
    /// recorded no post-warm-up value.
    pub moments: Option<RunMoments>,
    /// What the cell ran, so that history compares like with like.
    pub config_sha256: Option<String>,
    pub command: Vec<String>,
    pub env: std::collections::BTreeMap<String, String>,
}

/// `?, ?, ?` for an IN list.
fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

impl Store {
    /// Opens an existing database for `lcx query`: read-only at the SQLite
    /// level (`SQLITE_OPEN_READ_ONLY`) and, belt and braces, with
    /// `PRAGMA query_only`, so no statement can change the file.
    pub fn open_query_only(path: &Path) -> Result<Store, StoreError> {
        let store = Store::open_read_only(path)?;
        store.conn.pragma_update(None, "query_only", true)?;
        Ok(store)
    }

    /// Distinct live metric names of an experiment, sorted. A loose index
    /// scan (one seek per name per run on `metrics_live`) instead of a
    /// DISTINCT over every row: 10 ms rather than 0.5 s on a million rows.
    pub fn metric_names_fast(&self, experiment_id: i64) -> Result<Vec<String>, StoreError> {
        let mut st = self.conn.prepare(
            "WITH RECURSIVE n(run_id, name) AS ( \
               SELECT r.id, (SELECT MIN(m.name) FROM metrics m \
                             WHERE m.run_id = r.id AND m.superseded = 0) \
               FROM runs r WHERE r.experiment_id = ?1 \
               UNION ALL \
               SELECT n.run_id, (SELECT MIN(m.name) FROM metrics m \
                                 WHERE m.run_id = n.run_id AND m.superseded = 0 \
                                   AND m.name > n.name) \
               FROM n WHERE n.name IS NOT NULL) \
             SELECT DISTINCT name FROM n WHERE name IS NOT NULL ORDER BY name",
        )?;
        let names = st
            .query_map([experiment_id], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(names)
    }

    /// Hands each (cell, metric) series of `names` to `visit`, warm-up
    /// excluded, in plan order (arm, repeat, metric); `runs` restricts to
    /// some run ids (all of the experiment when empty). A cell without a
    /// live value of the metric is skipped. The statistics are the
    /// caller's (`report::moments`).
    ///
    /// Each series is read in one range scan of the `metrics_live` index,
    /// already in iteration order: the same numbers folded in SQL need a
    /// GROUP BY sorter and a window sort over every row (1.9 s and 6.5 s
    /// on a million rows, against about 0.4 s for the scans).
    pub fn for_each_series(
        &self,
        experiment_id: i64,
        names: &[String],
        runs: &[i64],
        mut visit: impl FnMut(CellSeries<'_>),
    ) -> Result<(), StoreError> {
        if names.is_empty() {
            return Ok(());
        }
        let warmup: Option<i64> = self
            .conn
            .query_row(
                "SELECT warmup FROM experiments WHERE id = ?1",
                [experiment_id],
                |r| r.get(0),
            )
            .optional()?;
        let Some(warmup) = warmup else {
            return Ok(());
        };
        // Each run's own warm-up where it was detected, else the experiment's.
        let mut st = self.conn.prepare(
            "SELECT id, arm, repeat, COALESCE(warmup, ?2) FROM runs WHERE experiment_id = ?1 \
             ORDER BY arm_index, repeat, id",
        )?;
        let plan: Vec<(i64, String, i64, i64)> = st
            .query_map(rusqlite::params![experiment_id, warmup], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let mut sorted_names = names.to_vec();
        sorted_names.sort();
        sorted_names.dedup();
        let mut series = self.conn.prepare(
            "SELECT iteration, value FROM metrics \
             WHERE run_id = ?1 AND name = ?2 AND superseded = 0 ORDER BY iteration",
        )?;
        let mut values = Vec::new();
        for (run_id, arm, repeat, warmup) in &plan {
            if !runs.is_empty() && !runs.contains(run_id) {
                continue;
            }
            for name in &sorted_names {
                values.clear();
                let (mut any, mut excluded) = (false, 0);
                let mut rows = series.query(rusqlite::params![run_id, name])?;
                while let Some(row) = rows.next()? {
                    any = true;
                    if row.get::<_, i64>(0)? <= *warmup {
                        excluded += 1;
                    } else {
                        values.push(row.get::<_, f64>(1)?);
                    }
                }
                if any {
                    visit(CellSeries {
                        run_id: *run_id,
                        arm,
                        repeat: *repeat,
                        name,
                        values: &values,
                        excluded,
                    });
                }
            }
        }
        Ok(())
    }

    /// The live values of `names` in cells `runs` of the experiment
    /// (warm-up included), for plots: in plan order, then repeat, metric
    /// and iteration. The cells are picked in Rust, not bound one SQL
    /// parameter each (an experiment may have more cells than SQLite takes
    /// parameters).
    pub fn iteration_series(
        &self,
        experiment_id: i64,
        runs: &[i64],
        names: &[String],
    ) -> Result<Vec<IterationPoint>, StoreError> {
        if names.is_empty() || runs.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT r.arm, r.id, r.repeat, m.name, m.iteration, m.value \
             FROM runs r JOIN metrics m ON m.run_id = r.id AND m.superseded = 0 \
             WHERE r.experiment_id = ? AND m.name IN ({}) \
             ORDER BY r.arm_index, r.repeat, r.id, m.name, m.iteration",
            placeholders(names.len())
        );
        let mut params: Vec<Value> = vec![experiment_id.into()];
        params.extend(names.iter().map(|n| Value::from(n.clone())));
        let wanted: std::collections::HashSet<i64> = runs.iter().copied().collect();
        let mut st = self.conn.prepare(&sql)?;
        let mut out = Vec::new();
        let mut rows = st.query(params_from_iter(params))?;
        while let Some(r) = rows.next()? {
            let run_id: i64 = r.get(1)?;
            if wanted.contains(&run_id) {
                out.push(IterationPoint {
                    arm: r.get(0)?,
                    run_id,
                    repeat: r.get(2)?,
                    name: r.get(3)?,
                    iteration: r.get(4)?,
                    value: r.get(5)?,
                });
            }
        }
        Ok(out)
    }

    /// Experiments with their arms and cell counts, newest first.
    pub fn experiment_list(&self, limit: Option<usize>) -> Result<Vec<ListRow>, StoreError> {
        let sql = "SELECT e.id, e.name, e.created_at, e.status, e.workload, \
                   (SELECT group_concat(arm, char(31)) FROM \
                        (SELECT arm FROM runs WHERE experiment_id = e.id \
                         GROUP BY arm ORDER BY MIN(arm_index))), \
                   (SELECT COUNT(*) FROM runs WHERE experiment_id = e.id), \
                   (SELECT COUNT(*) FROM runs WHERE experiment_id = e.id \
                        AND status = 'completed'), \
                   (SELECT COUNT(*) FROM runs WHERE experiment_id = e.id \
                        AND status = 'failed'), \
                   (SELECT COUNT(*) FROM runs WHERE experiment_id = e.id \
                        AND status = 'skipped'), \
                   e.runner_pid, e.runner_host, e.runner_boot_id, e.runner_start_ticks, \
                   e.detached_at IS NOT NULL, \
                   (SELECT COUNT(*) FROM runs WHERE experiment_id = e.id \
                        AND status = 'interrupted'), \
                   e.hostname \
                   FROM experiments e ORDER BY e.id DESC LIMIT ?1";
        let limit = limit.map(|l| l as i64).unwrap_or(-1);
        let mut st = self.conn.prepare(sql)?;
        let rows = st
            .query_map([limit], |r| {
                let arms: Option<String> = r.get(5)?;
                let stored: String = r.get(3)?;
                let runner =
                    super::read::runner_identity(r.get(10)?, r.get(11)?, r.get(12)?, r.get(13)?);
                let status = match stored.parse::<ExperimentStatus>() {
                    Ok(st) => super::read::effective_status(st, runner.as_ref(), r.get(14)?)
                        .as_str()
                        .to_string(),
                    Err(_) => stored,
                };
                Ok(ListRow {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    created_at: r.get(2)?,
                    status,
                    workload: r.get(4)?,
                    host: r.get(16)?,
                    arms: arms
                        .map(|a| a.split('\u{1f}').map(str::to_string).collect())
                        .unwrap_or_default(),
                    cells: r.get(6)?,
                    completed: r.get(7)?,
                    failed: r.get(8)?,
                    interrupted: r.get(15)?,
                    skipped: r.get(9)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    /// Every run of the experiments named `name` (optionally of one arm),
    /// oldest experiment first, with what it ran. The store reads the cells;
    /// their moments of a metric are folded from the series by
    /// `report::moments::history_moments` (`moments` is `None` here).
    ///
    /// `revision`: only cells of arms at that code revision, as asked
    /// (`main`) or by a prefix of the commit sha.
    pub fn history_runs(
        &self,
        name: &str,
        arm: Option<&str>,
        revision: Option<&str>,
    ) -> Result<Vec<HistoryRun>, StoreError> {
        let sql = "SELECT e.id, r.id, r.arm, r.repeat, r.status, \
                    r.config_sha256, r.command_json, r.env_json \
             FROM experiments e \
             JOIN runs r ON r.experiment_id = e.id AND (?2 IS NULL OR r.arm = ?2) \
                 AND (?3 IS NULL OR r.revision = ?3 OR substr(r.revision_sha, 1, length(?3)) = ?3) \
             WHERE e.name = ?1 \
             ORDER BY e.id, r.arm_index, r.repeat";
        let mut st = self.conn.prepare(sql)?;
        let rows: Vec<(HistoryRun, Option<String>, Option<String>)> = st
            .query_map(rusqlite::params![name, arm, revision], |r| {
                // Column by position, like read.rs's row mappers: alike in
                // shape only, as each reads its own SELECT.
                let run = HistoryRun {
                    experiment_id: r.get(0)?,
                    run_id: r.get(1)?,
                    arm: r.get(2)?,
                    repeat: r.get(3)?,
                    status: r.get(4)?,
                    moments: None,
                    config_sha256: r.get(5)?,
                    command: Vec::new(),
                    env: Default::default(),
                };
                Ok((run, r.get(6)?, r.get(7)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        // The JSON columns are read as everywhere else (`Store::runs`).
        rows.into_iter()
            .map(|(mut run, command, env)| {
                run.command = super::read::parse_json("runs.command_json", command)?;
                run.env = super::read::parse_json("runs.env_json", env)?;
                Ok(run)
            })
            .collect()
    }
}

/// Tests: arms a (repeats 1 and 2) and b, 4 iterations of `t` each,
/// warm-up 1, whose value (100) is an outlier that must not count.
#[cfg(test)]
pub(crate) fn seed_three_cells(store: &mut Store) -> (i64, Vec<i64>) {
    use super::types::{Fingerprint, NewExperiment, NewRun};
    use std::collections::BTreeMap;
    let id = store
        .insert_experiment(
            &NewExperiment {
                name: "exp".into(),
                description: String::new(),
                workload: "command".into(),
                file_path: "x.toml".into(),
                file_text: String::new(),
                file_sha256: String::new(),
                plan_json: "{}".into(),
                iterations: 4,
                warmup: 1,
                repeats: 2,
                baseline: Some("a".into()),
                lcx_version: "0".into(),
                git_commit: None,
                git_dirty: None,
                command_line: vec![],
                runner: None,
                fingerprint: Fingerprint::default(),
            },
            &[],
        )
        .unwrap();
    let new = |arm: &str, index, repeat| NewRun {
        arm: arm.into(),
        arm_label: arm.into(),
        arm_index: index,
        repeat,
        config_toml: None,
        config_sha256: None,
        command: vec!["true".into()],
        env: BTreeMap::new(),
        revision: None,
    };
    let runs = store
        .insert_runs(id, &[new("a", 0, 1), new("b", 1, 1), new("a", 0, 2)])
        .unwrap();
    for (k, &run) in runs.iter().enumerate() {
        let attempt = store.start_run(run).unwrap();
        for it in 1..=4 {
            // Warm-up iteration 1 is an outlier that must not count.
            let v = if it == 1 {
                100.0
            } else {
                (k + 1) as f64 * it as f64
            };
            store
                .insert_line(run, attempt, it, &[("t".into(), v)], &[])
                .unwrap();
        }
    }
    (id, runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_exclude_each_cells_warmup_in_plan_order() {
        let mut store = Store::open_in_memory().unwrap();
        let (id, runs) = seed_three_cells(&mut store);
        let names = vec!["t".to_string()];
        let mut seen = Vec::new();
        store
            .for_each_series(id, &names, &[], |c| {
                seen.push((c.run_id, c.arm.to_string(), c.values.to_vec(), c.excluded))
            })
            .unwrap();
        // Plan order a#1, a#2, b#1; iteration 1 (the outlier) excluded.
        assert_eq!(
            seen,
            vec![
                (runs[0], "a".into(), vec![2.0, 3.0, 4.0], 1),
                (runs[2], "a".into(), vec![6.0, 9.0, 12.0], 1),
                (runs[1], "b".into(), vec![4.0, 6.0, 8.0], 1),
            ]
        );
        let mut only = Vec::new();
        store
            .for_each_series(id, &names, &[runs[1]], |c| only.push(c.arm.to_string()))
            .unwrap();
        assert_eq!(only, ["b"]);

        assert_eq!(
            store.metric_names_fast(id).unwrap(),
            store.metric_names(id).unwrap()
        );
        let series = store.iteration_series(id, &runs, &names).unwrap();
        assert_eq!(series.len(), 12, "every value of the three cells");
        assert_eq!((series[0].arm.as_str(), series[0].repeat), ("a", 1));
        assert_eq!(series[0].value, 100.0);
        assert_eq!(series[1].value, 2.0);
        assert_eq!((series[4].arm.as_str(), series[4].repeat), ("a", 2));
        assert_eq!(series[8].arm, "b", "plan order, then repeat");
        let one = store.iteration_series(id, &runs[1..2], &names).unwrap();
        assert!(one.iter().all(|p| p.run_id == runs[1]));
    }

    #[test]
    fn list_and_history() {
        let mut store = Store::open_in_memory().unwrap();
        let (id, runs) = seed_three_cells(&mut store);
        store.skip_run(runs[1], "requires cuda").unwrap();
        let list = store.experiment_list(None).unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].id, id);
        assert_eq!(list[0].arms, vec!["a", "b"]);
        assert_eq!((list[0].cells, list[0].skipped), (3, 1));

        let mut h = store.history_runs("exp", Some("a"), None).unwrap();
        assert_eq!(h.len(), 2);
        assert!(h.iter().all(|r| r.arm == "a" && r.moments.is_none()));
        crate::report::moments::history_moments(&store, &mut h, "t").unwrap();
        assert_eq!(h[1].moments.as_ref().unwrap().sum, 27.0);
        crate::report::moments::history_moments(&store, &mut h, "missing").unwrap();
        assert!(h.iter().all(|r| r.moments.is_none()));
    }

    #[test]
    fn query_only_connection_refuses_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        drop(Store::open(&path).unwrap());
        let store = Store::open_query_only(&path).unwrap();
        assert!(store.query("DELETE FROM experiments").is_err());
        assert!(store.query("SELECT COUNT(*) FROM runs").is_ok());
    }
}

/// One stored value as `lcx export` writes it: enough to redo any
/// statistic without re-implementing the warm-up rule.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ExportRow {
    pub experiment_id: i64,
    pub experiment: String,
    pub run_id: i64,
    pub arm: String,
    pub repeat: i64,
    /// The cell's status (`completed`, `failed`, …): the reports judge
    /// completed cells only.
    pub status: String,
    pub iteration: i64,
    pub metric: String,
    pub value: f64,
    /// Within the cell's warm-up (its detected one under `warmup = "auto"`,
    /// else the file's): left out of every statistic lcx prints.
    pub warmup: bool,
    /// The experiment's host name (`experiments.hostname`: `LCX_HOSTNAME`
    /// or the machine's).
    pub host: Option<String>,
    /// The experiment's `created_at` (UTC).
    pub date: String,
    /// The experiment's `git_commit`.
    pub commit: Option<String>,
}

impl Store {
    /// Every live stored value of the experiments `ids` (all when empty),
    /// in experiment, plan, repeat, metric and iteration order, handed to
    /// `visit` one by one (memory stays flat however many there are) until
    /// it returns `false`.
    pub fn for_each_export_row(
        &self,
        ids: &[i64],
        mut visit: impl FnMut(&ExportRow) -> bool,
    ) -> Result<(), StoreError> {
        let mut st = self.conn.prepare(
            "SELECT e.id, e.name, r.id, r.arm, r.repeat, r.status, m.iteration, m.name, m.value, \
                    m.iteration <= COALESCE(r.warmup, e.warmup), \
                    e.hostname, e.created_at, e.git_commit \
             FROM experiments e \
             JOIN runs r ON r.experiment_id = e.id \
             JOIN metrics m ON m.run_id = r.id AND m.superseded = 0 \
             WHERE (?1 = 0 OR e.id IN (SELECT value FROM json_each(?2))) \
             ORDER BY e.id, r.arm_index, r.repeat, r.id, m.name, m.iteration",
        )?;
        let list = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
        let mut rows = st.query(rusqlite::params![ids.len() as i64, list])?;
        while let Some(r) = rows.next()? {
            let row = ExportRow {
                experiment_id: r.get(0)?,
                experiment: r.get(1)?,
                run_id: r.get(2)?,
                arm: r.get(3)?,
                repeat: r.get(4)?,
                status: r.get(5)?,
                iteration: r.get(6)?,
                metric: r.get(7)?,
                value: r.get(8)?,
                warmup: r.get(9)?,
                host: r.get(10)?,
                date: r.get(11)?,
                commit: r.get(12)?,
            };
            if !visit(&row) {
                break;
            }
        }
        Ok(())
    }
}
