-- A stable identity for every experiment, the same in every database it is
-- copied into: `lcx import` adds an experiment whose uuid the target lacks
-- and skips one it already holds, so importing a file twice adds nothing.
-- Rows before this migration get one from their content when it runs
-- (store/migrate.rs `name_older_experiments`: two copies of one database,
-- upgraded apart, agree on it); every new row gets a random one from the
-- trigger, shaped as a version-4 UUID, unless the insert gives it (an
-- import keeps the source's).
ALTER TABLE experiments ADD COLUMN uuid TEXT;


CREATE UNIQUE INDEX experiments_uuid ON experiments (uuid);

CREATE TRIGGER experiments_uuid_on_insert AFTER INSERT ON experiments
WHEN NEW.uuid IS NULL
BEGIN
    UPDATE experiments SET uuid =
        lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4'
        || substr(lower(hex(randomblob(2))), 2) || '-'
        || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(lower(hex(randomblob(2))), 2)
        || '-' || lower(hex(randomblob(6)))
    WHERE id = NEW.id;
END;
