-- gatehouse state: the version of each plugin that last started serving, per kind and id
-- (`ServedVersion` in records.rs), so that a restart, a reload or a moved registry tag cannot
-- serve an older signed version than the gateway served before, unless the operator forces it
-- (`gatehouse serve --allow-downgrade ID`). Written whenever a plugin starts serving: at start
-- and on reload, and when the admin API, the watched policy directory or a followed tag
-- installs one. An install never lowers the row; an operator's downgrade (a rollback, a forced
-- downgrade) does. Portable SQL: both backends apply it (SQLite's schema version is its count
-- of migrations, PostgreSQL's too, so neither is this file's number; 0010 is another change's).
CREATE TABLE served_versions (
    kind     TEXT   NOT NULL CHECK (kind IN ('adapter', 'policy')),
    plugin   TEXT   NOT NULL,
    version  TEXT   NOT NULL,
    digest   TEXT   NOT NULL,
    source   TEXT,
    at       BIGINT NOT NULL,
    PRIMARY KEY (kind, plugin)
);
