-- What the host was doing while each cell ran, sampled by the runner at
-- the cell's start and end (a local cell; a Slurm cell's node is not the
-- runner's host, and these stay NULL). NULL is unknown, never zero.
--   cpu_seconds: user + system CPU of the cell's process tree (wait4).
--   foreign_cpu_seconds: CPU the rest of the host used meanwhile: the busy
--     time of /proc/stat minus the cell's and the runner's own.
--   host_seconds: the span the host figures cover (start to end sample);
--     foreign_cpu_seconds / host_seconds is the foreign load in cores.
--   host_cpus: CPUs online.
--   steal_seconds: CPU time the hypervisor gave to other guests.
--   load_start, load_end: the 1-minute load average at each end.
--   cpu_mhz_min, cpu_mhz_max: the lowest and highest clock any CPU showed
--     in samples taken every half second.
--   swapped_pages: pages swapped in or out during the cell.
--   gpu_other_processes: compute processes on the GPU that were not the
--     cell's (nvidia-smi); NULL without a GPU or nvidia-smi.
--   rerun_note: why the runner ran the cell again at the end of the
--     schedule (`[measurement] rerun_contended`): its earlier attempt was
--     contended, or it is the baseline cell measured beside such a rerun.
ALTER TABLE runs ADD COLUMN cpu_seconds REAL;
ALTER TABLE runs ADD COLUMN foreign_cpu_seconds REAL;
ALTER TABLE runs ADD COLUMN host_seconds REAL;
ALTER TABLE runs ADD COLUMN host_cpus INTEGER;
ALTER TABLE runs ADD COLUMN steal_seconds REAL;
ALTER TABLE runs ADD COLUMN load_start REAL;
ALTER TABLE runs ADD COLUMN load_end REAL;
ALTER TABLE runs ADD COLUMN cpu_mhz_min REAL;
ALTER TABLE runs ADD COLUMN cpu_mhz_max REAL;
ALTER TABLE runs ADD COLUMN swapped_pages INTEGER;
ALTER TABLE runs ADD COLUMN gpu_other_processes INTEGER;
ALTER TABLE runs ADD COLUMN rerun_note TEXT;
