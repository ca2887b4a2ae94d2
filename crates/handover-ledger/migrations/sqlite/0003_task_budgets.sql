-- One budget per user task (scope = the client's scope, task = its name),
-- shared by every call of the task. Times are unix milliseconds; a row past
-- `expires_at` (deadline plus grace) counts as absent and is purged.
CREATE TABLE task_budgets (
    scope        TEXT    NOT NULL,
    task         TEXT    NOT NULL,
    policy       TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    deadline_at  INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    max_requests INTEGER NOT NULL,
    requests     INTEGER NOT NULL,   -- reserved (sent or in flight)
    max_cost     REAL,               -- USD; NULL = no ceiling
    cost         REAL    NOT NULL,   -- USD charged
    PRIMARY KEY (scope, task)
);

CREATE INDEX task_budgets_expiry ON task_budgets (expires_at);
