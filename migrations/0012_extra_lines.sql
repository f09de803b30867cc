-- Metric lines a cell printed past the `iterations` the plan asked for (a
-- command that does not read LCX_ITERATIONS): they are counted here and not
-- stored, so a cell's statistics use the first `iterations` lines only.
-- An arm with `variable_iterations = true` keeps them all.
ALTER TABLE runs ADD COLUMN extra_lines INTEGER NOT NULL DEFAULT 0;
