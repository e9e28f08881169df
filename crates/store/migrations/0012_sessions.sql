-- gatehouse state, sessions (issue 58): one row per session of a principal in a tenant under
-- a key (an MCP session id, a trace id, or '' for the principal's window). Written when the
-- session starts and when a call adds a label; its actions are the audit log's call entries
-- (`record.call.session_id`, indexed by each backend's next migration). `labels` is a JSON
-- array of {label, tool, tool_call_id, at_ms}, in the order they joined.
CREATE TABLE sessions (
    tenant      TEXT   NOT NULL,
    principal   TEXT   NOT NULL,
    key         TEXT   NOT NULL,
    started_at  BIGINT NOT NULL,
    last_at     BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    ended_at    BIGINT,
    labels      TEXT   NOT NULL,
    PRIMARY KEY (tenant, principal, key)
);
CREATE INDEX sessions_by_expiry ON sessions (expires_at);
CREATE INDEX sessions_by_start ON sessions (started_at);
