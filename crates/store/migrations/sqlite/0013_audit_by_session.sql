-- gatehouse state (SQLite): a session's actions. `session` is a copy of the session id a
-- call's record holds ('' when it names none: the principal's window; NULL for entries that
-- are not calls), written with the entry so the index is searched without reading records.
-- The record, which the chain's hash covers, stays the truth. The index replaces
-- `audit_by_principal`, which only the principal's recent tools (before sessions) searched.
ALTER TABLE audit ADD COLUMN session TEXT;
CREATE INDEX audit_by_session ON audit (tenant, principal, session, seq);
DROP INDEX audit_by_principal;
