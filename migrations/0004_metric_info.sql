-- The metric vocabulary (src/metrics.rs) as a table, so that SQL and pandas
-- users see each metric's unit, which way is better and what it counts.
-- Its rows are written by every lcx that opens the database for writing
-- (the vocabulary is code, not schema); `name` may hold `*` wildcards, so
-- join with GLOB:
--   SELECT m.name, i.unit, i.direction, i.description
--   FROM metrics_current m JOIN metric_info i ON m.name GLOB i.name;
-- Names of `command` arms have no row.
CREATE TABLE metric_info (
    name        TEXT PRIMARY KEY,
    unit        TEXT NOT NULL,
    direction   TEXT NOT NULL CHECK (direction IN ('lower', 'higher', 'none')),
    description TEXT NOT NULL
);
