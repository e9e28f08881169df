-- gatehouse state, schema version 2: gate 4's rate budgets, one row per budget (a fixed window
-- and the calls taken in it). The PostgreSQL store keeps budgets here, shared by every gateway
-- on the database; the SQLite store keeps them in memory and leaves this table empty.
CREATE TABLE rate_windows (
    key           TEXT   PRIMARY KEY,
    window_start  BIGINT NOT NULL,
    taken         BIGINT NOT NULL
);
