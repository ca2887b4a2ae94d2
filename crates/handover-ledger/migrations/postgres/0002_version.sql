-- Row version, incremented by every write of the row. Every UPDATE is
-- conditional on the version its command read, so a command computed from
-- a cached or unlocked read can only apply if the row is unchanged.
ALTER TABLE operations ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
