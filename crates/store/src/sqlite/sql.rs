//! The SQLite store's SQL, one function per operation: what each write job does inside its
//! batch's transaction ([`apply`]), and each read. Rows are mapped by the layer both backends
//! share ([`crate::rows`]), as `rows` reads them.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::unavailable;
use crate::audit::{self, AuditEntry, AuditQuery, GENESIS, VerifyReport};
use crate::checkpoint::Checkpoint;
use crate::connections::{Connection as StoredConnection, ConnectionFilter, ConnectionKey};
use crate::jobs::{self, Done, Judgement, Op};
use crate::records::{
    Approval, ApprovalFilter, ApprovalStatus, AuditEvent, Claim, ClaimRequest, Decision,
    IdempotencyKey, KeyRecord, Resolution, ServedAs, ServedVersion, StoreError, Task, TaskFilter,
    TaskUpdate, Waiting,
};
use crate::rows::{
    self, APPROVAL_COLUMNS, AUDIT_COLUMNS, AUTHORIZATION_COLUMNS, CHECKPOINT_COLUMNS,
    CHECKPOINTS_QUERY, CONNECTION_COLUMNS, Columns, KEY_RECORD_COLUMNS, KEY_ROW_COLUMNS,
    PLUGIN_CHANGES_QUERY, SERVED_COLUMNS, SERVED_QUERY, SESSION_COLUMNS, TASK_COLUMNS, from_db,
    to_db,
};
use crate::sessions::{Session, SessionAction, SessionFilter, SessionKey, SessionWrite};

/// Runs a statement through the connection's statement cache (hot statements are parsed once).
pub(super) fn exec(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// One row through the statement cache.
pub(super) fn query_row<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    map: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, map)
}

/// One job inside the batch's transaction.
pub(super) fn apply(txn: &Connection, head: &mut Head, op: &mut Op) -> Result<Done, StoreError> {
    match op {
        Op::Claim(request) => claim(txn, request).map(Done::Claim),
        Op::Record(record) => {
            let at = record.audit.at_ms;
            let session = record.session.as_ref().map(|s| s.key.as_str());
            append_in(txn, head, &record.audit, session)?;
            if let Some((key, result)) = &record.completes {
                let tool_call_id = call_id_of(&record.audit);
                let updated = exec(
                    txn,
                    "UPDATE idempotency SET state = 'complete', result = ?1 \
                     WHERE tenant = ?2 AND tool = ?3 AND key = ?4 AND tool_call_id = ?5",
                    params![result, key.tenant, key.tool, key.key, tool_call_id],
                )
                .map_err(unavailable)?;
                if updated == 0 {
                    tracing::warn!(key = %key.key, tool = %key.tool, "the key's record was resolved by an operator while the call ran; its result is not stored");
                }
            }
            if let Some(key) = &record.releases {
                exec(txn, "DELETE FROM idempotency WHERE tenant = ?1 AND tool = ?2 AND key = ?3 AND tool_call_id = ?4", params![key.tenant, key.tool, key.key, call_id_of(&record.audit)])
                .map_err(unavailable)?;
            }
            if let Some(id) = &record.executes {
                exec(txn, "UPDATE approvals SET status = 'executed', executed_by_call = ?1, decided_at = COALESCE(decided_at, ?3) \
                     WHERE id = ?2 AND status = 'approved'", params![call_id_of(&record.audit), id, to_db(at)])
                .map_err(unavailable)?;
            }
            if let Some(session) = &record.session {
                join_labels(txn, &record.audit, session)?;
            }
            Ok(Done::Unit)
        }
        Op::Propose(proposal) => propose(txn, proposal).map(|a| Done::Approval(Box::new(a))),
        Op::Decide(decision) => decide(txn, head, decision),
        Op::SetWaiting {
            approval_id,
            waiting,
        } => set_waiting(txn, approval_id, waiting).map(|()| Done::Unit),
        Op::CreateTask(task) => {
            create_task(txn, task).map(|()| Done::Task(Some(Box::new(task.clone()))))
        }
        Op::UpdateTask(update) => {
            update_task(txn, update).map(|task| Done::Task(task.map(Box::new)))
        }
        Op::Resolve {
            key,
            resolution,
            by,
            now_ms,
        } => resolve(txn, head, key, *resolution, by, *now_ms).map(|()| Done::Unit),
        Op::Prune(now_ms) => {
            let now = to_db(*now_ms);
            let keys = exec(
                txn,
                "DELETE FROM idempotency WHERE state = 'complete' AND expires_at <= ?1",
                params![now],
            );
            let tasks = exec(txn, "DELETE FROM tasks WHERE expires_at < ?1", params![now]);
            let sessions = exec(txn, "DELETE FROM sessions WHERE expires_at < ?1", params![now]);
            let flows = exec(
                txn,
                "DELETE FROM authorizations WHERE expires_at < ?1",
                params![now],
            );
            keys.and_then(|keys| Ok(keys + tasks? + sessions? + flows?))
                .map(|n| Done::Count(n as u64))
                .map_err(unavailable)
        }
        Op::Flush => Ok(Done::Unit),
        Op::AddCheckpoint(checkpoint) => exec(
            txn,
            &format!(
                "INSERT INTO audit_checkpoints ({CHECKPOINT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5)"
            ),
            params![
                to_db(checkpoint.seq),
                checkpoint.hash,
                to_db(checkpoint.at_ms),
                checkpoint.key_id,
                checkpoint.signature
            ],
        )
        .map(|_| Done::Unit)
        .map_err(unavailable),
        Op::AddPluginChange(change) => exec(
            txn,
            "INSERT INTO plugin_changes (seq, at, plugin, change) \
             VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM plugin_changes), ?1, ?2, ?3)",
            params![
                to_db(crate::records::now_ms()),
                change.plugin(),
                serde_json::to_string(change).expect("a plugin change serializes")
            ],
        )
        .map(|_| Done::Unit)
        .map_err(unavailable),
        Op::RecordServed(served) => (served.iter())
            .try_for_each(|(served, how)| record_served(txn, served, *how))
            .map(|()| Done::Unit)
            .map_err(unavailable),
        Op::StartSession { session, replaces } => exec(
            txn,
            &format!(
                "INSERT INTO sessions ({SESSION_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?4, ?5, NULL, '[]') \
                 ON CONFLICT (tenant, principal, key) DO UPDATE SET started_at = excluded.started_at, \
                 last_at = excluded.last_at, expires_at = excluded.expires_at, ended_at = NULL, \
                 labels = '[]' WHERE sessions.started_at = ?6"
            ),
            params![
                session.key.tenant,
                session.key.principal,
                session.key.key,
                to_db(session.started_ms),
                to_db(session.expires_ms),
                replaces.map(to_db)
            ],
        )
        .map(|n| Done::Count(n as u64))
        .map_err(unavailable),
        Op::EndSession { key, at_ms } => exec(
            txn,
            "UPDATE sessions SET ended_at = ?4 \
             WHERE tenant = ?1 AND principal = ?2 AND key = ?3 AND ended_at IS NULL",
            params![key.tenant, key.principal, key.key, to_db(*at_ms)],
        )
        .map(|n| Done::Count(n as u64))
        .map_err(unavailable),
        Op::PutConnection(c) => exec(
            txn,
            &format!(
                "INSERT INTO connections ({CONNECTION_COLUMNS}) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
                 ON CONFLICT (tenant, principal, provider) DO UPDATE SET \
                 resource = excluded.resource, sealed = excluded.sealed, \
                 token_hash = excluded.token_hash, scope = excluded.scope, \
                 expires_at = excluded.expires_at, updated_at = excluded.updated_at, \
                 refreshing_until = NULL"
            ),
            params![
                c.key.tenant,
                c.key.principal,
                c.key.provider,
                c.resource,
                c.sealed,
                c.token_hash,
                c.scope,
                c.expires_at_ms.map(to_db),
                to_db(c.created_at_ms),
                to_db(c.updated_at_ms)
            ],
        )
        .map(|_| Done::Unit)
        .map_err(unavailable),
        Op::DeleteConnection(key) => exec(
            txn,
            "DELETE FROM connections WHERE tenant = ?1 AND principal = ?2 AND provider = ?3",
            params![key.tenant, key.principal, key.provider],
        )
        .map(|n| Done::Count(n as u64))
        .map_err(unavailable),
        Op::LeaseConnection {
            key,
            token_hash,
            now_ms,
            until_ms,
        } => exec(
            txn,
            "UPDATE connections SET refreshing_until = ?5 \
             WHERE tenant = ?1 AND principal = ?2 AND provider = ?3 AND token_hash = ?4 \
               AND (refreshing_until IS NULL OR refreshing_until < ?6)",
            params![
                key.tenant,
                key.principal,
                key.provider,
                token_hash.as_str(),
                to_db(*until_ms),
                to_db(*now_ms)
            ],
        )
        .map(|n| Done::Count(n as u64))
        .map_err(unavailable),
        Op::BeginAuthorization(flow) => exec(
            txn,
            &format!(
                "INSERT INTO authorizations ({AUTHORIZATION_COLUMNS}) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
            ),
            params![
                flow.state_hash,
                flow.key.tenant,
                flow.key.principal,
                flow.key.provider,
                flow.resource,
                flow.sealed_verifier,
                flow.tool,
                flow.browser_hash,
                to_db(flow.created_at_ms),
                to_db(flow.expires_at_ms),
                flow.call
            ],
        )
        .map(|_| Done::Unit)
        .map_err(unavailable),
        Op::OpenAuthorization {
            state_hash,
            browser_hash,
            now_ms,
        } => query_row(
            txn,
            &format!(
                "UPDATE authorizations SET browser_hash = ?2 \
                 WHERE state_hash = ?1 AND browser_hash IS NULL AND expires_at >= ?3 \
                 RETURNING {AUTHORIZATION_COLUMNS}"
            ),
            params![&*state_hash, &*browser_hash, to_db(*now_ms)],
            |row| rows::authorization(row),
        )
        .optional()
        .map(|flow| Done::Authorization(flow.map(Box::new)))
        .map_err(unavailable),
        Op::TakeAuthorization { state_hash, now_ms } => query_row(
            txn,
            &format!(
                "DELETE FROM authorizations WHERE state_hash = ?1 \
                 RETURNING {AUTHORIZATION_COLUMNS}"
            ),
            params![&*state_hash],
            |row| rows::authorization(row),
        )
        .optional()
        .map(|flow| {
            let live = flow.filter(|f| f.expires_at_ms >= *now_ms && f.browser_hash.is_some());
            Done::Authorization(live.map(Box::new))
        })
        .map_err(unavailable),
    }
}

/// A principal's connection to a provider.
pub(super) fn connection(
    conn: &Connection,
    key: &ConnectionKey,
) -> rusqlite::Result<Option<StoredConnection>> {
    query_row(
        conn,
        &format!(
            "SELECT {CONNECTION_COLUMNS} FROM connections \
             WHERE tenant = ?1 AND principal = ?2 AND provider = ?3"
        ),
        params![key.tenant, key.principal, key.provider],
        |row| rows::connection(row),
    )
    .optional()
}

/// The flow whose state hashes to `state_hash`, as stored (live or not).
pub(super) fn authorization(
    conn: &Connection,
    state_hash: &str,
) -> rusqlite::Result<Option<crate::connections::Authorization>> {
    query_row(
        conn,
        &format!("SELECT {AUTHORIZATION_COLUMNS} FROM authorizations WHERE state_hash = ?1"),
        params![state_hash],
        |row| rows::authorization(row),
    )
    .optional()
}

/// Connections `filter` selects, by tenant, principal and provider.
pub(super) fn connections(
    conn: &Connection,
    filter: &ConnectionFilter,
) -> rusqlite::Result<Vec<StoredConnection>> {
    let mut statement = conn.prepare(&format!(
        "SELECT {CONNECTION_COLUMNS} FROM connections \
         WHERE (?1 IS NULL OR tenant = ?1) AND (?2 IS NULL OR principal = ?2) \
         AND (?3 IS NULL OR provider = ?3) ORDER BY tenant, principal, provider"
    ))?;
    let rows = statement.query_map(
        params![filter.tenant, filter.principal, filter.provider],
        |row| rows::connection(row),
    )?;
    rows.collect()
}

/// The labels a call's result brought join its session, if the session is still the one the
/// call found (the batch's transaction holds SQLite's write lock: nothing writes between the
/// read and the write).
fn join_labels(
    txn: &Connection,
    audit: &AuditEvent,
    session: &SessionWrite,
) -> Result<(), StoreError> {
    let (Some((started_ms, brought)), Some(tenant), Some(principal)) =
        (&session.labels, &audit.tenant, &audit.principal)
    else {
        return Ok(());
    };
    let current: Option<String> = query_row(
        txn,
        "SELECT labels FROM sessions \
         WHERE tenant = ?1 AND principal = ?2 AND key = ?3 AND started_at = ?4",
        params![tenant, principal, session.key, to_db(*started_ms)],
        |row| row.get(0),
    )
    .optional()
    .map_err(unavailable)?;
    let Some(labels) = current
        .as_deref()
        .map(|c| jobs::joined_labels(c, brought))
        .transpose()?
        .flatten()
    else {
        return Ok(());
    };
    exec(
        txn,
        "UPDATE sessions SET labels = ?5, last_at = max(last_at, ?6) \
         WHERE tenant = ?1 AND principal = ?2 AND key = ?3 AND started_at = ?4",
        params![
            tenant,
            principal,
            session.key,
            to_db(*started_ms),
            labels,
            to_db(audit.at_ms)
        ],
    )
    .map_err(unavailable)?;
    Ok(())
}

/// The session under `key` as stored, without its actions.
pub(super) fn session(conn: &Connection, key: &SessionKey) -> rusqlite::Result<Option<Session>> {
    query_row(
        conn,
        &format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant = ?1 AND principal = ?2 AND key = ?3"
        ),
        params![key.tenant, key.principal, key.key],
        |row| rows::session(row),
    )
    .optional()
}

/// The condition on `audit` that selects a session's call entries: ?1 tenant, ?2 principal,
/// ?3 key, ?4 its start, searched by the index `audit_by_session`.
pub(super) const SESSION_CALLS: &str = "tenant = ?1 AND principal = ?2 AND session = ?3 \
     AND kind = 'call' AND tool IS NOT NULL AND at >= ?4";

/// A session's last `limit` actions, oldest first.
pub(super) fn session_actions(
    conn: &Connection,
    session: &Session,
    limit: usize,
) -> rusqlite::Result<Vec<SessionAction>> {
    let mut actions = session_calls(conn, "tool, at, tool_call_id", session, limit, |row| {
        Ok(SessionAction {
            tool: row.text(0)?,
            tool_call_id: row.text_or_null(2)?.unwrap_or_default(),
            at_ms: from_db(row.int(1)?),
        })
    })?;
    actions.reverse();
    Ok(actions)
}

/// A session's call entries, newest first, at most `limit` (0: all).
pub(super) fn session_entries(
    conn: &Connection,
    session: &Session,
    limit: usize,
) -> rusqlite::Result<Vec<AuditEntry>> {
    session_calls(conn, AUDIT_COLUMNS, session, limit, |row| {
        rows::audit_entry(row)
    })
}

/// `columns` of a session's call entries, newest first, at most `limit` (0: all), each read
/// by `read`.
fn session_calls<T>(
    conn: &Connection,
    columns: &str,
    session: &Session,
    limit: usize,
    read: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {columns} FROM audit WHERE {SESSION_CALLS} ORDER BY seq DESC LIMIT ?5"
    ))?;
    let limit = if limit == 0 {
        -1
    } else {
        i64::try_from(limit).unwrap_or(i64::MAX)
    };
    let params = params![
        session.key.tenant,
        session.key.principal,
        session.key.key,
        to_db(session.started_ms),
        limit
    ];
    statement.query_map(params, read)?.collect()
}

/// Sessions `filter` selects, the most recently started first.
pub(super) fn sessions(
    conn: &Connection,
    filter: &SessionFilter,
) -> rusqlite::Result<Vec<Session>> {
    let mut statement = conn.prepare(&format!(
        "SELECT {SESSION_COLUMNS} FROM sessions \
         WHERE (?1 IS NULL OR tenant = ?1) AND (?2 IS NULL OR principal = ?2) \
         ORDER BY started_at DESC, tenant, principal, key LIMIT ?3"
    ))?;
    let limit = if filter.limit == 0 {
        -1
    } else {
        i64::try_from(filter.limit).unwrap_or(i64::MAX)
    };
    statement
        .query_map(params![filter.tenant, filter.principal, limit], |row| {
            rows::session(row)
        })?
        .collect()
}

/// A plugin that started serving: its row inserted, or replaced where [`jobs::replaces_served`]
/// says (the batch's transaction holds SQLite's write lock, so nothing writes between the read
/// and the write).
fn record_served(txn: &Connection, served: &ServedVersion, how: ServedAs) -> rusqlite::Result<()> {
    let recorded: Option<String> = query_row(
        txn,
        "SELECT version FROM served_versions WHERE kind = ?1 AND plugin = ?2",
        params![served.kind, served.plugin],
        |row| row.get(0),
    )
    .optional()?;
    if !jobs::replaces_served(recorded.as_deref(), served, how) {
        return Ok(());
    }
    exec(
        txn,
        &format!(
            "INSERT INTO served_versions ({SERVED_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
             ON CONFLICT (kind, plugin) DO UPDATE SET version = excluded.version, \
             digest = excluded.digest, source = excluded.source, at = excluded.at"
        ),
        params![
            served.kind,
            served.plugin,
            served.version,
            served.digest,
            served.source,
            to_db(served.at_ms)
        ],
    )
    .map(drop)
}

fn call_id_of(entry: &AuditEvent) -> Option<&str> {
    entry.tool_call_id.as_deref()
}

fn claim(txn: &Connection, request: &ClaimRequest) -> Result<Claim, StoreError> {
    let key = &request.key;
    let now = crate::records::now_ms();
    let existing = query_row(
        txn,
        &format!(
            "SELECT {KEY_ROW_COLUMNS} FROM idempotency WHERE tenant = ?1 AND tool = ?2 AND key = ?3"
        ),
        params![key.tenant, key.tool, key.key],
        |row| rows::key_row(row),
    )
    .optional()
    .map_err(unavailable)?;
    match jobs::judge(existing, request, now) {
        Judgement::Answer(claim) => return Ok(claim),
        Judgement::Indeterminate(claim) => {
            exec(
                txn,
                "UPDATE idempotency SET state = 'indeterminate' \
                 WHERE tenant = ?1 AND tool = ?2 AND key = ?3",
                params![key.tenant, key.tool, key.key],
            )
            .map_err(unavailable)?;
            return Ok(claim);
        }
        Judgement::Take => {}
    }
    exec(txn, "INSERT INTO idempotency (tenant, tool, key, request_hash, state, tool_call_id, lease_until, result, created_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4, 'in_progress', ?5, ?6, NULL, ?7, ?8) \
         ON CONFLICT (tenant, tool, key) DO UPDATE SET request_hash = excluded.request_hash, \
           state = 'in_progress', tool_call_id = excluded.tool_call_id, lease_until = excluded.lease_until, \
           result = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at", params![
            key.tenant,
            key.tool,
            key.key,
            request.request_hash,
            request.tool_call_id,
            to_db(request.lease_until_ms),
            to_db(now),
            to_db(request.expires_at_ms)
        ])
    .map_err(unavailable)?;
    Ok(Claim::Run)
}

/// The audit chain's head within one batch's transaction: the next entry's number and its
/// `prev_hash`, read at the batch's first append and moved by each (the transaction holds the
/// write lock, so no other writer moves it meanwhile). Empty after a job is rolled back.
#[derive(Default)]
pub(super) struct Head(Option<(u64, String)>);

/// Appends an audit entry after the head, read inside this transaction, and moves the head.
pub(super) fn append(
    txn: &Connection,
    head: &mut Head,
    entry: &AuditEvent,
) -> Result<(), StoreError> {
    append_in(txn, head, entry, None)
}

/// [`append`] for a call's entry in session `session` (its key; `""` is the principal's
/// window): the `session` column, a copy of the session id the record holds (which the hash
/// covers) that the session index searches without reading the record.
pub(super) fn append_in(
    txn: &Connection,
    head: &mut Head,
    entry: &AuditEvent,
    session: Option<&str>,
) -> Result<(), StoreError> {
    let (seq, prev_hash) = match head.0.take() {
        Some(next) => next,
        None => query_row(
            txn,
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)),
        )
        .optional()
        .map_err(unavailable)?
        .map_or((1, GENESIS.to_owned()), |(seq, hash)| {
            (from_db(seq) + 1, hash)
        }),
    };
    let hash = audit::entry_hash(&prev_hash, seq, entry);
    // An entry of no session leaves the column out (NULL), as a log older than it was written.
    let insert = if session.is_some() {
        "INSERT INTO audit (seq, at, kind, tool_call_id, tenant, principal, tool, outcome, record, prev_hash, hash, session) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
    } else {
        "INSERT INTO audit (seq, at, kind, tool_call_id, tenant, principal, tool, outcome, record, prev_hash, hash) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
    };
    let columns = params![
        to_db(seq),
        to_db(entry.at_ms),
        entry.kind,
        entry.tool_call_id,
        entry.tenant,
        entry.principal,
        entry.tool,
        entry.outcome,
        entry.record,
        prev_hash,
        hash,
        session
    ];
    let columns = if session.is_some() {
        columns
    } else {
        &columns[..11]
    };
    exec(txn, insert, columns).map_err(unavailable)?;
    head.0 = Some((seq + 1, hash));
    Ok(())
}

/// The audit query's SQL; its parameters are [`AuditQuery`]'s fields in order, then the limit.
///
/// SQLite cannot search an index for `?1 IS NULL OR tool_call_id = ?1`: the whole log would be
/// scanned in `seq` order. A call has a handful of entries, so when one is asked for, the call
/// index is searched and the few rows found are sorted. The other filters keep the scan in `seq`
/// order, which stops at the limit (a tenant or a time range may hold most of the log).
pub(super) fn audit_query(by_call: bool) -> String {
    let call = if by_call {
        "tool_call_id = ?1"
    } else {
        "?1 IS NULL"
    };
    format!(
        "SELECT {AUDIT_COLUMNS} FROM audit \
         WHERE {call} AND (?2 IS NULL OR tenant = ?2) \
           AND (?3 IS NULL OR outcome = ?3) AND (?4 IS NULL OR at >= ?4) \
           AND (?5 IS NULL OR at < ?5) AND (?6 IS NULL OR seq > ?6) \
           AND (?7 IS NULL OR tool = ?7) AND (?8 IS NULL OR principal = ?8) \
           AND (?9 IS NULL OR kind = ?9) \
           AND (?10 IS NULL OR instr(record, '\"replay_of\":' || json_quote(?10)) > 0) \
         ORDER BY seq LIMIT ?11"
    )
}

pub(super) fn approval_by_id(conn: &Connection, id: &str) -> rusqlite::Result<Option<Approval>> {
    query_row(
        conn,
        &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"),
        params![id],
        |row| rows::approval(row),
    )
    .optional()
}

pub(super) fn approval_by_key(
    conn: &Connection,
    key: &IdempotencyKey,
) -> rusqlite::Result<Option<Approval>> {
    query_row(
        conn,
        &format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE tenant = ?1 AND tool = ?2 AND idempotency_key = ?3"
        ),
        params![key.tenant, key.tool, key.key],
        |row| rows::approval(row),
    )
    .optional()
}

fn propose(txn: &Connection, proposal: &Approval) -> Result<Approval, StoreError> {
    if let Some(key) = &proposal.idempotency_key {
        let key = IdempotencyKey {
            tenant: proposal.tenant.clone(),
            tool: proposal.tool.clone(),
            key: key.clone(),
        };
        if let Some(existing) = approval_by_key(txn, &key).map_err(unavailable)? {
            return Ok(existing);
        }
    }
    let (waiting_on, waiting_until, waiting_task) = rows::waiting_columns(&proposal.waiting);
    exec(
        txn,
        &format!(
            "INSERT INTO approvals ({APPROVAL_COLUMNS}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'pending', ?10, ?11, NULL, NULL, NULL, NULL, \
                     NULL, ?12, ?13, ?14)"
        ),
        params![
            proposal.id,
            proposal.tenant,
            proposal.tool,
            proposal.idempotency_key,
            proposal.request_hash,
            proposal.call.to_string(),
            rows::strings_json(&proposal.principals),
            proposal.mode,
            rows::strings_json(&proposal.reasons),
            to_db(proposal.created_at_ms),
            to_db(proposal.expires_at_ms),
            waiting_on,
            waiting_until,
            waiting_task
        ],
    )
    .map_err(unavailable)?;
    approval_by_id(txn, &proposal.id)
        .map_err(unavailable)?
        .ok_or_else(|| StoreError::Unavailable("the new approval vanished".to_owned()))
}

/// A decision: a conditional update from `pending`, so it applies only if no other decision
/// did first. A refused one (by the rules, or because another came first) writes its
/// `approval_refused` entry and is answered [`Done::Refused`].
fn decide(txn: &Connection, head: &mut Head, decision: &Decision) -> Result<Done, StoreError> {
    let read = |txn: &Connection| approval_by_id(txn, &decision.id).map_err(unavailable);
    let approval = read(txn)?.ok_or_else(|| jobs::unknown_approval(&decision.id))?;
    let refuse = |head: &mut Head, why: String| -> Result<Done, StoreError> {
        append(txn, head, &jobs::refusal_event(&approval, decision, &why))?;
        Ok(Done::Refused(why))
    };
    let status = match jobs::check_decision(&approval, decision) {
        Ok(status) => status,
        Err(why) => return refuse(head, why),
    };
    let updated = exec(
        txn,
        "UPDATE approvals SET status = ?1, decided_by = ?2, decided_reason = ?3, decided_at = ?4, \
         decided_as = ?5 WHERE id = ?6 AND status = 'pending'",
        params![
            status.as_str(),
            decision.by,
            decision.reason,
            to_db(decision.now_ms),
            decision.decided_as.as_str(),
            decision.id
        ],
    )
    .map_err(unavailable)?;
    if updated == 0 {
        return refuse(head, jobs::lost_race(read(txn)?.as_ref(), decision));
    }
    append(
        txn,
        head,
        &jobs::decision_event(&approval, decision, status),
    )?;
    let decided = read(txn)?.ok_or_else(|| jobs::unknown_approval(&decision.id))?;
    Ok(Done::Approval(Box::new(decided)))
}

fn set_waiting(txn: &Connection, approval_id: &str, waiting: &Waiting) -> Result<(), StoreError> {
    let (on, until, task) = rows::waiting_columns(waiting);
    let updated = exec(
        txn,
        "UPDATE approvals SET waiting_on = ?1, waiting_until = ?2, waiting_task = ?3 WHERE id = ?4",
        params![on, until, task, approval_id],
    )
    .map_err(unavailable)?;
    if updated == 0 {
        return Err(jobs::unknown_approval(approval_id));
    }
    Ok(())
}

/// A new task and, when it waits on an approval, the approval marked as waited on by it.
fn create_task(txn: &Connection, task: &Task) -> Result<(), StoreError> {
    if task_by_id(txn, &task.id).map_err(unavailable)?.is_some() {
        return Err(jobs::task_exists(&task.id));
    }
    if let Some(approval_id) = &task.approval_id {
        let waiting = Waiting::Task {
            id: task.id.clone(),
        };
        set_waiting(txn, approval_id, &waiting)?;
    }
    let (call, result) = rows::task_json(task);
    exec(
        txn,
        &format!(
            "INSERT INTO tasks ({TASK_COLUMNS}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
        ),
        params![
            task.id,
            task.tenant,
            task.principal,
            task.tool,
            task.approval_id,
            call,
            task.status.as_str(),
            task.status_message,
            result,
            to_db(task.created_at_ms),
            to_db(task.updated_at_ms),
            to_db(task.expires_at_ms)
        ],
    )
    .map_err(unavailable)?;
    Ok(())
}

/// A task's update, if it applies ([`jobs::updated_task`]): written only while the task is
/// still in the status it was read in.
fn update_task(txn: &Connection, update: &TaskUpdate) -> Result<Option<Task>, StoreError> {
    let Some(task) = task_by_id(txn, &update.id).map_err(unavailable)? else {
        return Ok(None);
    };
    let Some(updated) = jobs::updated_task(&task, update) else {
        return Ok(None);
    };
    let (_, result) = rows::task_json(&updated);
    let written = exec(
        txn,
        "UPDATE tasks SET status = ?1, status_message = ?2, result = ?3, updated_at = ?4 \
         WHERE id = ?5 AND status = ?6",
        params![
            updated.status.as_str(),
            updated.status_message,
            result,
            to_db(updated.updated_at_ms),
            updated.id,
            task.status.as_str()
        ],
    )
    .map_err(unavailable)?;
    Ok((written == 1).then_some(updated))
}

fn resolve(
    txn: &Connection,
    head: &mut Head,
    key: &IdempotencyKey,
    resolution: Resolution,
    by: &str,
    now_ms: u64,
) -> Result<(), StoreError> {
    let row = query_row(
            txn,
            "SELECT state, lease_until, tool_call_id FROM idempotency WHERE tenant = ?1 AND tool = ?2 AND key = ?3",
            params![key.tenant, key.tool, key.key],
            |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?, row.get::<_, String>(2)?)),
        )
        .optional()
        .map_err(unavailable)?
        .ok_or_else(|| jobs::unknown_key(key))?;
    let (state, lease_until, tool_call_id) = row;
    jobs::check_resolvable(key, &state, from_db(lease_until), now_ms)?;
    match resolution {
        Resolution::Release => exec(
            txn,
            "DELETE FROM idempotency WHERE tenant = ?1 AND tool = ?2 AND key = ?3",
            params![key.tenant, key.tool, key.key],
        ),
        Resolution::Done => exec(
            txn,
            "UPDATE idempotency SET state = 'complete', result = NULL WHERE tenant = ?1 AND tool = ?2 AND key = ?3",
            params![key.tenant, key.tool, key.key],
        ),
    }
    .map_err(unavailable)?;
    append(
        txn,
        head,
        &jobs::resolution_event(key, resolution, by, now_ms, tool_call_id),
    )
}

/// The approvals `filter` selects, newest first.
pub(super) fn approvals(
    conn: &Connection,
    filter: &ApprovalFilter,
) -> rusqlite::Result<Vec<Approval>> {
    let limit = if filter.limit == 0 { 100 } else { filter.limit };
    let mut statement = conn.prepare(&format!(
        "SELECT {APPROVAL_COLUMNS} FROM approvals \
         WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR tenant = ?2) \
         ORDER BY created_at DESC, id LIMIT ?3"
    ))?;
    let rows = statement.query_map(
        params![
            filter.status.map(ApprovalStatus::as_str),
            filter.tenant,
            i64::try_from(limit).unwrap_or(i64::MAX)
        ],
        |row| rows::approval(row),
    )?;
    rows.collect()
}

pub(super) fn task_by_id(conn: &Connection, id: &str) -> rusqlite::Result<Option<Task>> {
    query_row(
        conn,
        &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"),
        params![id],
        |row| rows::task(row),
    )
    .optional()
}

/// The task query's SQL; its parameters are [`TaskFilter`]'s fields in order (the statuses as
/// a JSON list, the cursor as its time and id), then the limit.
///
/// As in [`audit_query`], SQLite cannot search an index for `?1 IS NULL OR tenant = ?1`: a
/// listing of one owner's tasks (a tenant and a principal, the common one: a client listing
/// its tasks) names them plainly, so it searches `tasks_by_owner`, newest first, and stops at
/// the limit.
pub(super) fn task_query(by_owner: bool) -> String {
    let owner = if by_owner {
        "tenant = ?1 AND principal = ?2"
    } else {
        "(?1 IS NULL OR tenant = ?1) AND (?2 IS NULL OR principal = ?2)"
    };
    format!(
        "SELECT {TASK_COLUMNS} FROM tasks \
         WHERE {owner} \
           AND (?3 IS NULL OR status IN (SELECT value FROM json_each(?3))) \
           AND (?4 IS NULL OR approval_id = ?4) \
           AND (?5 IS NULL OR (created_at, id) < (?5, ?6)) \
         ORDER BY created_at DESC, id DESC LIMIT ?7"
    )
}

/// The tasks `filter` selects, newest first (then by id, descending), before its cursor.
pub(super) fn tasks(conn: &Connection, filter: &TaskFilter) -> rusqlite::Result<Vec<Task>> {
    let limit = if filter.limit == 0 { 100 } else { filter.limit };
    let statuses = (!filter.statuses.is_empty()).then(|| {
        let names: Vec<String> = filter
            .statuses
            .iter()
            .map(|status| status.as_str().to_owned())
            .collect();
        rows::strings_json(&names)
    });
    let (before_at, before_id) = filter
        .before
        .as_ref()
        .map(|(at, id)| (to_db(*at), id.as_str()))
        .unzip();
    let by_owner = filter.tenant.is_some() && filter.principal.is_some();
    let mut statement = conn.prepare_cached(&task_query(by_owner))?;
    let rows = statement.query_map(
        params![
            filter.tenant,
            filter.principal,
            statuses,
            filter.approval_id,
            before_at,
            before_id,
            i64::try_from(limit).unwrap_or(i64::MAX)
        ],
        |row| rows::task(row),
    )?;
    rows.collect()
}

/// Every idempotency record, oldest first, as operators see it at `now_ms`.
pub(super) fn keys(conn: &Connection, now_ms: u64) -> rusqlite::Result<Vec<KeyRecord>> {
    let mut statement = conn.prepare(&format!(
        "SELECT {KEY_RECORD_COLUMNS} FROM idempotency ORDER BY created_at"
    ))?;
    let rows = statement.query_map([], |row| rows::key_record(row, now_ms))?;
    rows.collect()
}

/// The entries `query` selects, in order.
pub(super) fn audit(conn: &Connection, query: &AuditQuery) -> rusqlite::Result<Vec<AuditEntry>> {
    // One writer has nothing to partition: the log is chain 0.
    if query.chain.is_some_and(|chain| chain != 0) {
        return Ok(Vec::new());
    }
    let mut statement = conn.prepare(&audit_query(query.tool_call_id.is_some()))?;
    let limit = if query.limit == 0 {
        -1
    } else {
        i64::try_from(query.limit).unwrap_or(i64::MAX)
    };
    let rows = statement.query_map(
        params![
            query.tool_call_id,
            query.tenant,
            query.outcome,
            query.since_ms.map(to_db),
            query.until_ms.map(to_db),
            query.after_seq.map(to_db),
            query.tool,
            query.principal,
            query.kind,
            query.replay_of,
            limit
        ],
        |row| rows::audit_entry(row),
    )?;
    rows.collect()
}

/// The stored checkpoints, oldest first.
pub(super) fn checkpoints(conn: &Connection) -> rusqlite::Result<Vec<Checkpoint>> {
    let mut statement = conn.prepare(CHECKPOINTS_QUERY)?;
    let rows = statement.query_map([], |row| rows::checkpoint(row))?;
    rows.collect()
}

/// The stored plugin changes' JSON, in order.
pub(super) fn plugin_changes(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut statement = conn.prepare(PLUGIN_CHANGES_QUERY)?;
    let rows = statement.query_map([], |row| row.text(0))?;
    rows.collect()
}

/// The recorded served versions, by kind, then id.
pub(super) fn served_versions(conn: &Connection) -> rusqlite::Result<Vec<ServedVersion>> {
    let mut statement = conn.prepare(SERVED_QUERY)?;
    let rows = statement.query_map([], |row| rows::served_version(row))?;
    rows.collect()
}

/// Walks the whole log in order, checking its chain.
pub(super) fn verify_audit(conn: &Connection) -> rusqlite::Result<VerifyReport> {
    let mut statement = conn.prepare(&format!("SELECT {AUDIT_COLUMNS} FROM audit ORDER BY seq"))?;
    let mut chains = audit::Chains::default();
    for entry in statement.query_map([], |row| rows::audit_entry(row))? {
        if !chains.check(entry?) {
            break;
        }
    }
    Ok(chains.report())
}
