-- gatehouse state: the changes operators made to the serving plugins through the admin API
-- (install, rollback, set_config), in order, so a restarted gateway applies them again on top
-- of its config (see `PluginChange` in state/mod.rs). An install keeps the signed component
-- (base64); it is verified again, signature and trust, when applied.
CREATE TABLE plugin_changes (
    seq     BIGINT PRIMARY KEY,
    at      BIGINT NOT NULL,
    plugin  TEXT   NOT NULL,
    change  TEXT   NOT NULL
);
