-- Handover ledger on PostgreSQL, schema version 1.
-- Same columns as the SQLite schema (one row per identity (scope, key);
-- nullable columns carry the current state's data; times are unix ms).
-- Standard SQL only: no PostgreSQL-only types, functions or triggers.
CREATE TABLE operations (
    scope               TEXT    COLLATE "C" NOT NULL,   -- byte order, as in SQLite
    key                 TEXT    COLLATE "C" NOT NULL,
    action              TEXT    NOT NULL,
    params              TEXT,               -- canonical JSON text (RFC 8785); NULL once tombstoned
    fingerprint         TEXT    NOT NULL,   -- sha-256 hex of {action, params}
    state               TEXT    NOT NULL,
    epoch               BIGINT  NOT NULL,   -- last epoch issued (fencing)
    holder              TEXT,
    lease_until         BIGINT,
    dispatched_at       BIGINT,
    result              TEXT,               -- canonical JSON text (confirmed)
    reason              TEXT,               -- rejected / cancelled / unknown
    evidence            TEXT,
    decided_at          BIGINT,             -- terminal states only
    unknown_owner       TEXT,
    unknown_since       BIGINT,
    next_check_at       BIGINT,
    diverged            BOOLEAN NOT NULL DEFAULT FALSE,
    destination_key     TEXT    NOT NULL,
    created_at          BIGINT  NOT NULL,
    updated_at          BIGINT  NOT NULL,
    first_dispatched_at BIGINT,
    dispatch_count      BIGINT  NOT NULL DEFAULT 0,
    tombstone           BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (scope, key)
);

-- begin / claim / every post-claim write: the primary key only.
-- Blockers (block width scope/action): unresolved rows of one action only.
CREATE INDEX operations_unresolved ON operations (action, scope, created_at)
    WHERE state = 'unknown' OR state = 'dispatched';
-- Lease expiries that must become `unknown`: in-flight rows only.
CREATE INDEX operations_leases ON operations (lease_until)
    WHERE state = 'dispatched' OR (state = 'claimed' AND dispatch_count > 0);
-- Reconciliation and the review queue: unknown rows only, by next check.
CREATE INDEX operations_unknown ON operations (next_check_at, created_at)
    WHERE state = 'unknown';
-- Retention: decided rows only.
CREATE INDEX operations_decided ON operations (decided_at)
    WHERE decided_at IS NOT NULL;
-- Listing by state.
CREATE INDEX operations_state_created ON operations (state, created_at, scope, key);

-- Append-only attempt log; `seq` keeps insertion order.
CREATE TABLE attempts (
    seq             BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    attempt_id      TEXT    NOT NULL UNIQUE,
    scope           TEXT    NOT NULL,
    key             TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    epoch           BIGINT,
    executor        TEXT    NOT NULL,
    destination_key TEXT    NOT NULL,
    sent_at         BIGINT  NOT NULL,
    finished_at     BIGINT,
    outcome         TEXT    NOT NULL,
    evidence        TEXT,
    metadata        TEXT
);

CREATE INDEX attempts_operation ON attempts (scope, key, epoch);
