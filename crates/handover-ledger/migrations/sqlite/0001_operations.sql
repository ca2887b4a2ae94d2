-- Handover ledger, schema version 1.
-- One row per operation identity (scope, key); nullable columns carry the
-- data of the current state. Times are unix milliseconds.
CREATE TABLE operations (
    scope               TEXT    NOT NULL,
    key                 TEXT    NOT NULL,
    action              TEXT    NOT NULL,
    params              TEXT,               -- canonical JSON; NULL once tombstoned
    fingerprint         TEXT    NOT NULL,   -- sha-256 hex of {action, params}
    state               TEXT    NOT NULL,
    epoch               INTEGER NOT NULL,   -- last epoch issued
    holder              TEXT,
    lease_until         INTEGER,
    dispatched_at       INTEGER,
    result              TEXT,               -- canonical JSON (confirmed)
    reason              TEXT,               -- rejected / cancelled / unknown
    evidence            TEXT,
    decided_at          INTEGER,            -- terminal states only
    unknown_owner       TEXT,
    unknown_since       INTEGER,
    next_check_at       INTEGER,
    diverged            INTEGER NOT NULL DEFAULT 0,
    destination_key     TEXT    NOT NULL,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    first_dispatched_at INTEGER,
    dispatch_count      INTEGER NOT NULL DEFAULT 0,
    tombstone           INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, key)
);

-- Blockers (unknown / expired dispatched ops of an action) and due lease expiries.
CREATE INDEX operations_state_action ON operations (state, action, scope);
CREATE INDEX operations_state_lease ON operations (state, lease_until);
-- Retention and listing.
CREATE INDEX operations_decided ON operations (decided_at);
CREATE INDEX operations_created ON operations (created_at, scope, key);

-- Append-only attempt log; `seq` keeps insertion order.
CREATE TABLE attempts (
    seq             INTEGER PRIMARY KEY,
    attempt_id      TEXT    NOT NULL UNIQUE,
    scope           TEXT    NOT NULL,
    key             TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    epoch           INTEGER,
    executor        TEXT    NOT NULL,
    destination_key TEXT    NOT NULL,
    sent_at         INTEGER NOT NULL,
    finished_at     INTEGER,
    outcome         TEXT    NOT NULL,
    evidence        TEXT,
    metadata        TEXT
);

CREATE INDEX attempts_operation ON attempts (scope, key, epoch);
