-- 0002_runner_faults: what the runner records about faults, and the
-- machine's measured ceiling.
--
-- experiments  runner_host, runner_boot_id, runner_start_ticks: with
--   runner_pid, the identity of the process that holds the experiment (set
--   when it is created or resumed). A reader on the same host and boot
--   tells a live runner from a killed one by /proc/<pid>'s start time; lcx
--   shows an experiment left `running` by a dead runner as `abandoned`
--   (and its `running` cells likewise), and `lcx run --resume` refuses an
--   experiment whose runner is alive.
--
-- experiments  peak_isa, peak_fp32_gflops_core, peak_fp32_gflops,
--   peak_stream_gbytes_per_second: the machine's ceiling measured by
--   `lcx bench peak` when the experiment started (FMA loop on one core and
--   on every core, streaming triad bandwidth), the denominator of the
--   report's fraction-of-peak figures. NULL for experiments recorded before.
--
-- runs  malformed_lines (stdout lines that start like a JSON object but
--   are not one, or carry an unusable `iteration`), nonfinite_values
--   (NaN / Infinity / out-of-range numbers, kept in metric_nonfinite),
--   overlong_lines (lines over the 1 MiB cap; their head is kept in
--   stderr_tail): counts for the current attempt.
--
-- runs.warmup  iterations this cell excludes as warm-up when the file says
--   `warmup = "auto"`: the start-up transient the runner detected (MSER) on
--   the cell's primary metric when it completed. NULL: the experiment's
--   `warmup` applies. The views below exclude COALESCE(runs.warmup,
--   experiments.warmup) leading iterations of each run.
--
-- run_warmup  per run: experiment_id, run_id, arm, repeat, declared (the
--   experiment's warmup), detected (runs.warmup, NULL unless auto), used.
--
-- metric_nonfinite  numeric fields whose value is not finite, which the
--   metrics table (REAL NOT NULL, finite only) cannot hold: run_id,
--   attempt, iteration, name, value ('NaN', 'Infinity' or '-Infinity'),
--   superseded (as in metrics).

ALTER TABLE experiments ADD COLUMN runner_host TEXT;
ALTER TABLE experiments ADD COLUMN runner_boot_id TEXT;
ALTER TABLE experiments ADD COLUMN runner_start_ticks TEXT;
ALTER TABLE experiments ADD COLUMN peak_isa TEXT;
ALTER TABLE experiments ADD COLUMN peak_fp32_gflops_core REAL;
ALTER TABLE experiments ADD COLUMN peak_fp32_gflops REAL;
ALTER TABLE experiments ADD COLUMN peak_stream_gbytes_per_second REAL;

ALTER TABLE runs ADD COLUMN malformed_lines INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN nonfinite_values INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN overlong_lines INTEGER NOT NULL DEFAULT 0;

CREATE TABLE metric_nonfinite (
    run_id     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    attempt    INTEGER NOT NULL,
    iteration  INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    value      TEXT    NOT NULL CHECK (value IN ('NaN', 'Infinity', '-Infinity')),
    superseded INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX metric_nonfinite_live
    ON metric_nonfinite (run_id, name, iteration) WHERE superseded = 0;

ALTER TABLE runs ADD COLUMN warmup INTEGER;

DROP VIEW arm_metric_stats;
DROP VIEW run_metric_stats;
DROP VIEW metrics_current;

CREATE VIEW metrics_current AS
SELECT r.experiment_id, m.run_id, r.arm, r.repeat, m.iteration, m.name, m.value,
       CASE WHEN m.iteration <= COALESCE(r.warmup, e.warmup) THEN 1 ELSE 0 END AS warmup
FROM metrics m
JOIN runs r ON r.id = m.run_id
JOIN experiments e ON e.id = r.experiment_id
WHERE m.superseded = 0;

CREATE VIEW run_metric_stats AS
SELECT experiment_id, run_id, arm, repeat, name,
       COUNT(*)                 AS n,
       AVG(value)               AS mean,
       MIN(value)               AS min,
       MAX(value)               AS max,
       SUM(value)               AS sum,
       SUM(value * value)       AS sum_sq,
       CASE WHEN COUNT(*) > 1
            THEN max(0.0, (SUM(value * value) - SUM(value) * SUM(value) / COUNT(*)) / (COUNT(*) - 1))
       END                      AS variance
FROM metrics_current
WHERE warmup = 0
GROUP BY experiment_id, run_id, arm, repeat, name;

CREATE VIEW arm_metric_stats AS
SELECT experiment_id, arm, name,
       COUNT(*)                 AS n,
       COUNT(DISTINCT run_id)   AS runs,
       AVG(value)               AS mean,
       MIN(value)               AS min,
       MAX(value)               AS max,
       SUM(value)               AS sum,
       SUM(value * value)       AS sum_sq,
       CASE WHEN COUNT(*) > 1
            THEN max(0.0, (SUM(value * value) - SUM(value) * SUM(value) / COUNT(*)) / (COUNT(*) - 1))
       END                      AS variance
FROM metrics_current
WHERE warmup = 0
GROUP BY experiment_id, arm, name;

CREATE VIEW run_warmup AS
SELECT r.experiment_id, r.id AS run_id, r.arm, r.repeat,
       e.warmup AS declared, r.warmup AS detected,
       COALESCE(r.warmup, e.warmup) AS used
FROM runs r JOIN experiments e ON e.id = r.experiment_id;
