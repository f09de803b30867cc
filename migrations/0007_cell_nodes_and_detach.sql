-- What each cell ran on and where a Slurm cell's files are.
--   node_json: the hardware of the node (hostname, CPU model, CPUs,
--     memory, GPU and driver), written by the job itself on a Slurm node
--     and by the coordinator for a local cell. Cells of one experiment on
--     different hardware are not a like-for-like comparison.
--   slurm_dir: the job's folder on the shared filesystem (job.sh, its
--     config, stdout, stderr, and the records the job script writes), so a
--     later coordinator (`lcx run --attach`) can follow a job it did not
--     submit.
--   slurm_run: the `started` record of the job's run whose lines the cell
--     holds; a later follower that finds another knows Slurm requeued the
--     job in between, and starts the cell again instead of mixing runs.
-- detached_at: set by `lcx run --detach` once every cell is submitted; the
-- experiment stays `running` with no runner, and readers show it as
-- `detached` instead of `abandoned`. Cleared when the experiment ends.
ALTER TABLE runs ADD COLUMN node_json TEXT;
ALTER TABLE runs ADD COLUMN slurm_dir TEXT;
ALTER TABLE runs ADD COLUMN slurm_run TEXT;
ALTER TABLE experiments ADD COLUMN detached_at TEXT;
