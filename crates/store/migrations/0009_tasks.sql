-- gatehouse state: MCP tasks (a tool call that waits, on an approval say, while its client
-- polls it: `Task` in records.rs), and on each approval who decided it and how its caller
-- waits for the decision. Portable SQL: both backends apply it (SQLite's schema version is its
-- count of migrations, PostgreSQL's too, so neither is this file's number).

-- One row per task until it expires (`prune` deletes it then).
CREATE TABLE tasks (
    id              TEXT   PRIMARY KEY,
    tenant          TEXT   NOT NULL,
    principal       TEXT   NOT NULL,
    tool            TEXT   NOT NULL,
    approval_id     TEXT,
    call            TEXT   NOT NULL,
    status          TEXT   NOT NULL CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
    status_message  TEXT,
    result          TEXT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL
);
-- A client listing its own tasks, newest first (the cursor is `(created_at, id)`).
CREATE INDEX tasks_by_owner ON tasks (tenant, principal, created_at, id);
-- The tasks in a status (those still working, say).
CREATE INDEX tasks_by_status ON tasks (status, created_at);
-- The tasks waiting on an approval, once it is decided.
CREATE INDEX tasks_by_approval ON tasks (approval_id);
-- Pruning.
CREATE INDEX tasks_by_expiry ON tasks (expires_at);

-- In what capacity an approval was decided: `DecidedAs` (NULL while undecided). Every decision
-- made before this version was an approver's.
ALTER TABLE approvals ADD COLUMN decided_as TEXT CHECK (decided_as IN ('approver', 'consent', 'caller'));
UPDATE approvals SET decided_as = 'approver' WHERE decided_by IS NOT NULL;

-- How the caller waits for the decision: `Waiting`. `waiting_on` NULL (an approval from
-- before this version) is `retry`; `held` keeps its time in `waiting_until` (unix ms), `task`
-- its task in `waiting_task`.
ALTER TABLE approvals ADD COLUMN waiting_on TEXT CHECK (waiting_on IN ('retry', 'held', 'task'));
ALTER TABLE approvals ADD COLUMN waiting_until BIGINT;
ALTER TABLE approvals ADD COLUMN waiting_task TEXT;
