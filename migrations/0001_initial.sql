-- 0001_initial: the lcx run store.
--
-- This file is append-only history: a later change to the schema is a new
-- file (0002_*.sql, ...), never an edit here. lcx applies the files in order
-- when it opens a database and records how many it applied in
-- `PRAGMA user_version`; a database whose user_version is higher than the
-- number of files this lcx knows is refused untouched.
--
-- Public contract (sqlite3 / pandas users may rely on these names):
--
-- experiments  one row per `lcx run FILE`.
--   id, name, description, workload (train|bench-forward|bench-trainer|command),
--   file_path (as given on the command line), file_text (the file as written),
--   file_sha256 (hex sha256 of file_text), plan_json (the validated, resolved
--   plan: arms, their argv, resolved configs, columns, gate, notes),
--   iterations, warmup (leading iterations excluded from statistics), repeats,
--   baseline (arm name), status (running|completed|failed|interrupted),
--   created_at / finished_at (UTC, ISO 8601 'YYYY-MM-DDTHH:MM:SS.SSSZ'),
--   lcx_version, git_commit + git_dirty (of the working directory lcx ran in;
--   NULL outside a git repository), command_line (JSON argv of the runner),
--   runner_pid, and the host fingerprint: hostname, os, cpu_model, cpu_cores,
--   memory_bytes, gpu_name, gpu_driver, cuda_version (driver's, from
--   nvidia-smi), cuda_available (0/1, libtorch's view), torch_version,
--   torch_intra_threads, torch_inter_threads, fingerprint_json (all of it).
--
-- runs  one row per cell (arm x repeat), created `pending` when the
--   experiment starts so missing cells are visible.
--   id, experiment_id, arm, arm_label, arm_index (0-based position in the
--   plan), repeat (1-based), attempt (1 + number of resumes that re-ran it),
--   config_toml + config_sha256 (resolved trainer config; NULL for command
--   arms), command_json (argv of the child), env_json (extra environment),
--   status (pending|running|completed|failed|interrupted|skipped),
--   skip_reason, exit_code, signal (number, when the child died of one),
--   error (one-line cause), stderr_tail (last lines of the child's stderr),
--   iterations_done (metric lines received in the current attempt),
--   started_at, finished_at, wall_seconds.
--
-- metrics  long form: one row per (run, iteration, numeric field) of the
--   child's JSON lines. run_id, attempt, iteration (1-based), name, value.
--   superseded = 1 marks rows of an attempt that was re-run by `--resume`;
--   they are kept for forensics and excluded by every view below.
--
-- metric_text  the same for non-numeric fields (e.g. "mode": "fp32"), so
--   they stay queryable: run_id, attempt, iteration, name, value (TEXT).
--
-- reports  written by `lcx report --archive`: id, experiment_id (NULL for a
--   report over several experiments), path, sha256, format, created_at.
--
-- Views (warm-up excluded: only iterations > experiments.warmup, only
-- rows with superseded = 0). SQLite has no stddev, so the views carry
-- `variance` (sample variance, n-1 denominator, from sums); stddev is
-- sqrt(variance).
--   metrics_current     metrics without superseded rows, joined with the
--                       run's experiment_id, arm and repeat, plus `warmup`
--                       (1 when the iteration is a warm-up iteration).
--   run_metric_stats    per (experiment_id, run_id, arm, repeat, name):
--                       n, mean, min, max, sum, sum_sq, variance.
--   arm_metric_stats    per (experiment_id, arm, name) over all repeats:
--                       n, runs, mean, min, max, sum, sum_sq, variance.
--
-- Example: mean interleaved traversal time of every option-b experiment:
--   SELECT e.id, e.created_at, s.mean FROM arm_metric_stats s
--   JOIN experiments e ON e.id = s.experiment_id
--   WHERE e.name = 'option-b' AND s.arm = 'interleaved-workers'
--     AND s.name = 'time/traversal_seconds' ORDER BY e.created_at;

CREATE TABLE experiments (
    id                  INTEGER PRIMARY KEY,
    name                TEXT    NOT NULL,
    description         TEXT    NOT NULL DEFAULT '',
    workload            TEXT    NOT NULL,
    file_path           TEXT    NOT NULL,
    file_text           TEXT    NOT NULL,
    file_sha256         TEXT    NOT NULL,
    plan_json           TEXT    NOT NULL,
    iterations          INTEGER NOT NULL,
    warmup              INTEGER NOT NULL DEFAULT 0,
    repeats             INTEGER NOT NULL DEFAULT 1,
    baseline            TEXT,
    status              TEXT    NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
    created_at          TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    finished_at         TEXT,
    lcx_version         TEXT    NOT NULL,
    git_commit          TEXT,
    git_dirty           INTEGER,
    command_line        TEXT,
    runner_pid          INTEGER,
    hostname            TEXT,
    os                  TEXT,
    cpu_model           TEXT,
    cpu_cores           INTEGER,
    memory_bytes        INTEGER,
    gpu_name            TEXT,
    gpu_driver          TEXT,
    cuda_version        TEXT,
    cuda_available      INTEGER,
    torch_version       TEXT,
    torch_intra_threads INTEGER,
    torch_inter_threads INTEGER,
    fingerprint_json    TEXT
);
CREATE INDEX experiments_name ON experiments (name, id);

CREATE TABLE runs (
    id              INTEGER PRIMARY KEY,
    experiment_id   INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    arm             TEXT    NOT NULL,
    arm_label       TEXT    NOT NULL,
    arm_index       INTEGER NOT NULL,
    repeat          INTEGER NOT NULL,
    attempt         INTEGER NOT NULL DEFAULT 1,
    config_toml     TEXT,
    config_sha256   TEXT,
    command_json    TEXT    NOT NULL,
    env_json        TEXT,
    status          TEXT    NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'completed', 'failed', 'interrupted', 'skipped')),
    skip_reason     TEXT,
    exit_code       INTEGER,
    signal          INTEGER,
    error           TEXT,
    stderr_tail     TEXT,
    iterations_done INTEGER NOT NULL DEFAULT 0,
    started_at      TEXT,
    finished_at     TEXT,
    wall_seconds    REAL,
    UNIQUE (experiment_id, arm, repeat)
);

CREATE TABLE metrics (
    run_id     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    attempt    INTEGER NOT NULL,
    iteration  INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    value      REAL    NOT NULL,
    superseded INTEGER NOT NULL DEFAULT 0
);
-- At most one live value per (run, iteration, metric): the resume guarantee.
CREATE UNIQUE INDEX metrics_live ON metrics (run_id, name, iteration) WHERE superseded = 0;

CREATE TABLE metric_text (
    run_id     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    attempt    INTEGER NOT NULL,
    iteration  INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    superseded INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX metric_text_live ON metric_text (run_id, name, iteration) WHERE superseded = 0;

CREATE TABLE reports (
    id            INTEGER PRIMARY KEY,
    experiment_id INTEGER REFERENCES experiments (id) ON DELETE SET NULL,
    path          TEXT    NOT NULL,
    sha256        TEXT    NOT NULL,
    format        TEXT    NOT NULL DEFAULT 'markdown',
    created_at    TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE VIEW metrics_current AS
SELECT r.experiment_id, m.run_id, r.arm, r.repeat, m.iteration, m.name, m.value,
       CASE WHEN m.iteration <= e.warmup THEN 1 ELSE 0 END AS warmup
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
       -- max(0, ...) because the sums formula can go a hair below zero in floating point.
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
       -- max(0, ...) because the sums formula can go a hair below zero in floating point.
       CASE WHEN COUNT(*) > 1
            THEN max(0.0, (SUM(value * value) - SUM(value) * SUM(value) / COUNT(*)) / (COUNT(*) - 1))
       END                      AS variance
FROM metrics_current
WHERE warmup = 0
GROUP BY experiment_id, arm, name;
