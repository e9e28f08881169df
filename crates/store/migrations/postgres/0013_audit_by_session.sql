-- gatehouse state (PostgreSQL): a session's actions, found by the session id a call's record
-- holds ('' when it names none: the principal's window). Queries use this exact expression.
-- (SQLite copies the id into a column of its own instead: there the gateway's writer would pay
-- for parsing each record; here the database does, and `gatehouse_append` stays as it is.)
CREATE INDEX audit_by_session ON audit (
    tenant, principal, (coalesce(record::jsonb -> 'call' ->> 'session_id', '')), seq
);
-- It replaces `audit_by_principal`, which only the principal's recent tools (before sessions)
-- searched.
DROP INDEX audit_by_principal;
