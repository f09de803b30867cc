-- Arms at code revisions (`revision = "main"` in an experiment file): per
-- cell, the revision as asked, the commit it resolved to, the sha256 of the
-- uncommitted changes when it was the working tree, and the built lcx's own
-- `--version`. NULL for arms that ran the current binary or command.
--   SELECT arm, revision, substr(revision_sha, 1, 12), binary_version
--   FROM runs WHERE experiment_id = 3;
ALTER TABLE runs ADD COLUMN revision TEXT;
ALTER TABLE runs ADD COLUMN revision_sha TEXT;
ALTER TABLE runs ADD COLUMN revision_diff_sha256 TEXT;
ALTER TABLE runs ADD COLUMN binary_version TEXT;
