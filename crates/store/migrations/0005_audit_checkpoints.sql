-- gatehouse state: signed checkpoints of the audit chain (see state/checkpoint.rs). Each row
-- is one head the gateway signed with its `[store.checkpoints] key`: a copy for export; the
-- copies that count are the ones pushed out of the database (file or HTTP sink).
CREATE TABLE audit_checkpoints (
    seq        BIGINT NOT NULL,
    hash       TEXT   NOT NULL,
    at         BIGINT NOT NULL,
    key_id     TEXT   NOT NULL,
    signature  TEXT   NOT NULL
);
CREATE INDEX audit_checkpoints_by_seq ON audit_checkpoints (seq, at);
