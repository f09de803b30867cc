-- The programs outside the measurement that used the host's CPUs most
-- while a local cell ran: a JSON array of at most three
-- {"name": "cargo", "cores": 0.93}, busiest first, each above 0.05 of a
-- core averaged over the cell; the cell's own processes and the runner
-- are left out. A program that started and ended within the cell is not
-- seen. '[]': none used that much. NULL: not measured (a Slurm cell, a
-- host without /proc, or a cell recorded before this column).
ALTER TABLE runs ADD COLUMN foreign_processes TEXT;
