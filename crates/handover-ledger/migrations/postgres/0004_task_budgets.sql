-- One budget per user task (scope = the client's scope, task = its name),
-- shared by every replica serving a call of the task. Same columns as the
-- SQLite schema; times are unix milliseconds; a row past `expires_at`
-- (deadline plus grace) counts as absent and is purged.
CREATE TABLE task_budgets (
    scope        TEXT    COLLATE "C" NOT NULL,
    task         TEXT    COLLATE "C" NOT NULL,
    policy       TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    deadline_at  BIGINT  NOT NULL,
    expires_at   BIGINT  NOT NULL,
    max_requests BIGINT  NOT NULL,
    requests     BIGINT  NOT NULL,   -- reserved (sent or in flight)
    max_cost     DOUBLE PRECISION,   -- USD; NULL = no ceiling
    cost         DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (scope, task)
);

CREATE INDEX task_budgets_expiry ON task_budgets (expires_at);
