-- Where each cell ran: the host of the process that ran it (this machine's
-- name for local cells, the node Slurm placed the job on for Slurm cells),
-- and the Slurm job id. Cells of one experiment on different hosts are
-- not a like-for-like comparison; the report says so.
ALTER TABLE runs ADD COLUMN host TEXT;
ALTER TABLE runs ADD COLUMN slurm_job TEXT;
