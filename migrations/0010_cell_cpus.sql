-- The CPUs each local cell's process was allowed to run on, as the kernel
-- reported them once it started (`Cpus_allowed_list`, e.g. `0-3,6`): the
-- arm's `cpus`, the set `[measurement] pin = true` chose, or every CPU the
-- runner had when the cell was not pinned. NULL for a Slurm cell or where
-- the kernel does not say.
ALTER TABLE runs ADD COLUMN cpus TEXT;
