-- Seconds during a local cell when the runner itself could not run: its
-- process stopped (SIGSTOP, a frozen cgroup), the virtual machine paused,
-- or the host starved it. The runner reads a cell's end when it runs
-- again, so such a pause lands in the cell's wall_seconds although the
-- child did not see it; the report flags the cell. NULL: not measured
-- (a Slurm cell, or a cell recorded before this column).
ALTER TABLE runs ADD COLUMN runner_stall_seconds REAL;
