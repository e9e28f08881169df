-- gatehouse state, schema version 1. Portable SQL (SQLite and PostgreSQL): times are unix
-- milliseconds, JSON is TEXT, enumerations are TEXT with CHECK constraints.

-- Gate 7: one row per (tenant, tool, key) while the key is remembered.
CREATE TABLE idempotency (
    tenant        TEXT   NOT NULL,
    tool          TEXT   NOT NULL,
    key           TEXT   NOT NULL,
    request_hash  TEXT   NOT NULL,
    state         TEXT   NOT NULL CHECK (state IN ('in_progress', 'complete', 'indeterminate')),
    tool_call_id  TEXT   NOT NULL,
    lease_until   BIGINT NOT NULL,
    result        TEXT,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL,
    PRIMARY KEY (tenant, tool, key)
);
CREATE INDEX idempotency_expiry ON idempotency (expires_at);

-- Gate 6: proposed calls and their decisions.
CREATE TABLE approvals (
    id               TEXT   PRIMARY KEY,
    tenant           TEXT   NOT NULL,
    tool             TEXT   NOT NULL,
    idempotency_key  TEXT,
    request_hash     TEXT   NOT NULL,
    call             TEXT   NOT NULL,
    principals       TEXT   NOT NULL,
    mode             TEXT   NOT NULL,
    reasons          TEXT   NOT NULL,
    status           TEXT   NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'executed')),
    created_at       BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL,
    decided_by       TEXT,
    decided_reason   TEXT,
    decided_at       BIGINT,
    executed_by_call TEXT
);
CREATE UNIQUE INDEX approvals_by_key ON approvals (tenant, tool, idempotency_key);
CREATE INDEX approvals_by_status ON approvals (status, created_at);

-- Gate 10: the append-only, hash-chained audit log (see state/audit.rs).
CREATE TABLE audit (
    seq           BIGINT PRIMARY KEY,
    at            BIGINT NOT NULL,
    kind          TEXT   NOT NULL,
    tool_call_id  TEXT,
    tenant        TEXT,
    principal     TEXT,
    tool          TEXT,
    outcome       TEXT,
    record        TEXT   NOT NULL,
    prev_hash     TEXT   NOT NULL,
    hash          TEXT   NOT NULL
);
CREATE INDEX audit_by_call ON audit (tool_call_id);
CREATE INDEX audit_by_principal ON audit (tenant, principal, seq);
CREATE INDEX audit_by_time ON audit (at);
