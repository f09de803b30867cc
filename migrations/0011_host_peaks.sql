-- The FP32 ceiling an experiment is read against, and where it came from.
--   peak_source: `probed` (measured when the experiment was created),
--     `cached` (the host's best clean probe of this boot, from the user's
--     cache file or host_peaks: no probe ran), `disturbed` (probed, but no
--     try had all its cores: a floor, not a ceiling), `reprobed` (a cell's
--     phase rate exceeded it and the runner probed again).
--   peak_tries, peak_spread: the clean all-core tries the figure is the
--     best of, and how far apart they lay (max / min - 1).
--   peak_probed_at: when that probe ran (UTC).
--   peak_note: what the runner did when a phase rate exceeded the ceiling.
ALTER TABLE experiments ADD COLUMN peak_source TEXT;
ALTER TABLE experiments ADD COLUMN peak_tries INTEGER;
ALTER TABLE experiments ADD COLUMN peak_spread REAL;
ALTER TABLE experiments ADD COLUMN peak_probed_at TEXT;
ALTER TABLE experiments ADD COLUMN peak_note TEXT;

-- The best clean `lcx bench peak` probe per host key (host, boot, CPU
-- governor, CPU model, CPUs lcx may use): each figure the best seen.
CREATE TABLE host_peaks (
    hostname TEXT NOT NULL,
    boot_id TEXT NOT NULL,
    governor TEXT NOT NULL,
    cpu_model TEXT NOT NULL,
    cpus TEXT NOT NULL,
    isa TEXT NOT NULL,
    threads INTEGER NOT NULL,
    fp32_gflops REAL NOT NULL,
    fp32_gflops_core REAL NOT NULL,
    stream_gbytes_per_second REAL NOT NULL,
    tries INTEGER NOT NULL,
    spread REAL NOT NULL,
    probed_at TEXT NOT NULL,
    checked_at TEXT NOT NULL,
    probes INTEGER NOT NULL,
    PRIMARY KEY (hostname, boot_id, governor, cpu_model, cpus)
);
