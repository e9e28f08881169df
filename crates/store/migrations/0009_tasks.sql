-- gatehouse state: on each approval, who decided it and how its caller waits for the decision.
-- Portable SQL: both backends apply it (SQLite's schema version is its count of migrations,
-- PostgreSQL's too, so neither is this file's number).

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
