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
