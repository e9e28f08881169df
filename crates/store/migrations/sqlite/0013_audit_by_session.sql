-- gatehouse state (SQLite): a session's actions, found by the session id a call's record holds
-- ('' when it names none: the principal's window). Queries use this exact expression.
CREATE INDEX audit_by_session ON audit (
    tenant, principal, coalesce(json_extract(record, '$.call.session_id'), ''), seq
);
