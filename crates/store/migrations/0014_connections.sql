-- gatehouse state, each user's own upstream accounts (issue 60). `connections`: one row per
-- principal of a tenant per OAuth provider, the tokens sealed by the host's vault (base64; the
-- store cannot open them). `authorizations`: the flows under way, keyed by the SHA-256 of their
-- `state` (the state itself is never stored), each taken once by the gateway's callback, with
-- the call waiting for it (its envelope, JSON), which a task waiting for the connection runs.
CREATE TABLE connections (
    tenant      TEXT   NOT NULL,
    principal   TEXT   NOT NULL,
    provider    TEXT   NOT NULL,
    resource    TEXT   NOT NULL,
    sealed      TEXT   NOT NULL,
    token_hash  TEXT   NOT NULL,
    scope       TEXT   NOT NULL,
    expires_at  BIGINT,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, principal, provider)
);
CREATE TABLE authorizations (
    state_hash       TEXT   NOT NULL PRIMARY KEY,
    tenant           TEXT   NOT NULL,
    principal        TEXT   NOT NULL,
    provider         TEXT   NOT NULL,
    resource         TEXT   NOT NULL,
    sealed_verifier  TEXT   NOT NULL,
    tool             TEXT   NOT NULL,
    browser_hash     TEXT,
    created_at       BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL,
    call             TEXT   NOT NULL
);
CREATE INDEX authorizations_by_expiry ON authorizations (expires_at);
