-- Fencing a takeover, and a cell's time measured apart from the queue.
--   experiments.runner_epoch: a counter each runner's claim on the
--     experiment increments (a new run, a resume, a --takeover). Every
--     write a runner makes for the experiment's cells checks, inside the
--     same transaction, that the epoch is still the one its claim set; a
--     runner that finds a newer one was taken over, and stops.
--   experiments.runner_claimed_at: when the current runner claimed it.
--   runs.db_wait_seconds: how long the runner waited for the database's
--     write lock (other lcx processes on the file) while the cell ran;
--     wall_seconds is the cell's own time and does not include it.
ALTER TABLE experiments ADD COLUMN runner_epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE experiments ADD COLUMN runner_claimed_at TEXT;
ALTER TABLE runs ADD COLUMN db_wait_seconds REAL;
