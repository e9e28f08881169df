-- gatehouse state, schema version 3, SQLite only: the audit log keyed by its rowid.
--
-- In SQLite only a column declared exactly `INTEGER PRIMARY KEY` is the table's rowid; version
-- 1's `seq BIGINT PRIMARY KEY` made a hidden rowid plus a unique index on `seq`, so every entry
-- was written into five b-trees (the table, that index, and the three below). Here `seq` is the
-- rowid, and `audit_by_time` is gone: SQLite's audit queries filter time with
-- `?4 IS NULL OR at >= ?4`, which it cannot search an index for, so the index was only written.
-- PostgreSQL keeps version 1's table (its planner uses the time index; its key is the table's).
--
-- The table is rebuilt: every existing entry is copied once, in `seq` order, unchanged (the
-- hash chain covers the values, not the storage).
CREATE TABLE audit_by_seq (
    seq           INTEGER PRIMARY KEY,
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
INSERT INTO audit_by_seq
    SELECT seq, at, kind, tool_call_id, tenant, principal, tool, outcome, record, prev_hash, hash
    FROM audit ORDER BY seq;
DROP TABLE audit;
ALTER TABLE audit_by_seq RENAME TO audit;
CREATE INDEX audit_by_call ON audit (tool_call_id);
CREATE INDEX audit_by_principal ON audit (tenant, principal, seq);
