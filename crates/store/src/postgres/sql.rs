//! The PostgreSQL store's SQL, one place per operation: the statements every writer prepares
//! ([`Statements`]), what each write job does in a careful transaction ([`apply`]), what a
//! transaction writes last under the chains' locks ([`Last`], [`Entries`]), and each read.
//! Rows are mapped by the layer both backends share (`crate::rows`), as `rows` reads them.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, GenericClient, Statement, Transaction};

use super::rows::{PgError, audit_entry};
use super::{CHANNEL, WRITE_LOCK, describe};
use crate::audit::{self, AuditEntry, AuditQuery, VerifyReport};
use crate::checkpoint::Checkpoint;
use crate::connections::{Connection, ConnectionFilter, ConnectionKey};
use crate::jobs::{self, Done, Judgement, Op};
use crate::records::{
    Approval, ApprovalFilter, ApprovalStatus, AuditEvent, CallRecord, Claim, ClaimRequest,
    Decision, KeyRecord, PluginChange, Resolution, ServedAs, ServedVersion, StoreError, Task,
    TaskFilter, TaskUpdate, Waiting,
};
use crate::rows::{
    self, APPROVAL_COLUMNS, AUDIT_COLUMNS, AUTHORIZATION_COLUMNS, CHECKPOINT_COLUMNS,
    CHECKPOINTS_QUERY, CONNECTION_COLUMNS, Columns, KEY_RECORD_COLUMNS, KEY_ROW_COLUMNS,
    PLUGIN_CHANGES_QUERY, SERVED_COLUMNS, SERVED_QUERY, SESSION_COLUMNS, TASK_COLUMNS, from_db,
    to_db,
};
use crate::sessions::{Session, SessionAction, SessionFilter, SessionKey};
use crate::store::Waiters;

/// A read inside a write job: the database's error is the transaction's (it is lost: the outer
/// error), a damaged row only the job's (the inner one).
fn inside<T>(read: Result<T, PgError>) -> Result<Result<T, StoreError>, tokio_postgres::Error> {
    match read {
        Ok(value) => Ok(Ok(value)),
        Err(PgError::Db(error)) => Err(error),
        Err(PgError::Corrupt(corrupt)) => Ok(Err(StoreError::Unavailable(corrupt.to_string()))),
    }
}

/// Rows read per query when verifying the whole audit chain.
pub(super) const VERIFY_PAGE: i64 = 10_000;

/// The statements every call runs, prepared once per connection.
pub(super) struct Statements {
    /// `[store] chains`: how many chains the entries go to ([`audit::chain_of`]).
    pub(super) chains: u32,
    pub(super) lock: Statement,
    pub(super) append: Statement,
    pub(super) new_key: Statement,
    pub(super) find_key: Statement,
    pub(super) take_key: Statement,
    pub(super) stuck_key: Statement,
    pub(super) complete_key: Statement,
    pub(super) release_key: Statement,
    pub(super) execute_approval: Statement,
    pub(super) notify: Statement,
}

impl Statements {
    /// Prepares every statement on `client`.
    pub(super) async fn prepare(client: &Client, chains: u32) -> Result<Self, String> {
        let prepare = async |sql: &str| {
            client
                .prepare(sql)
                .await
                .map_err(|e| format!("cannot prepare `{sql}`: {}", describe(&e)))
        };
        Ok(Self {
            chains,
            lock: prepare("SELECT pg_advisory_xact_lock($1)").await?,
            // Every entry of a batch in one statement: a column of values per array, numbered
            // and hashed by the database under each chain's lock.
            append: prepare(
                "SELECT gatehouse_append($1, $2::int[], $3::bigint[], $4::text[], $5::text[], \
                   $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bytea[])",
            )
            .await?,
            // A claim of a key nobody holds, in one statement: the row's own lock (a concurrent
            // insert of the same key waits for the other's commit) makes it atomic.
            new_key: prepare(
                "INSERT INTO idempotency (tenant, tool, key, request_hash, state, tool_call_id, lease_until, result, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, 'in_progress', $5, $6, NULL, $7, $8) \
                 ON CONFLICT (tenant, tool, key) DO NOTHING",
            )
            .await?,
            find_key: prepare(&format!(
                "SELECT {KEY_ROW_COLUMNS} FROM idempotency \
                 WHERE tenant = $1 AND tool = $2 AND key = $3 FOR UPDATE"
            ))
            .await?,
            take_key: prepare(
                "INSERT INTO idempotency (tenant, tool, key, request_hash, state, tool_call_id, lease_until, result, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, 'in_progress', $5, $6, NULL, $7, $8) \
                 ON CONFLICT (tenant, tool, key) DO UPDATE SET request_hash = excluded.request_hash, \
                   state = 'in_progress', tool_call_id = excluded.tool_call_id, lease_until = excluded.lease_until, \
                   result = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at",
            )
            .await?,
            stuck_key: prepare(
                "UPDATE idempotency SET state = 'indeterminate' WHERE tenant = $1 AND tool = $2 AND key = $3",
            )
            .await?,
            complete_key: prepare(
                "UPDATE idempotency SET state = 'complete', result = $1 \
                 WHERE tenant = $2 AND tool = $3 AND key = $4 AND tool_call_id = $5",
            )
            .await?,
            release_key: prepare(
                "DELETE FROM idempotency WHERE tenant = $1 AND tool = $2 AND key = $3 AND tool_call_id = $4",
            )
            .await?,
            execute_approval: prepare(
                "UPDATE approvals SET status = 'executed', executed_by_call = $1, decided_at = COALESCE(decided_at, $3) \
                 WHERE id = $2 AND status = 'approved'",
            )
            .await?,
            notify: prepare("SELECT pg_notify($1, $2)").await?,
        })
    }
}

/// A claim as the row `new_key` and `take_key` write.
pub(super) struct NewClaim<'r> {
    request: &'r ClaimRequest,
    times: [i64; 3],
}

impl<'r> NewClaim<'r> {
    pub(super) fn of(request: &'r ClaimRequest, now_ms: u64) -> Self {
        Self {
            request,
            times: [request.lease_until_ms, now_ms, request.expires_at_ms].map(to_db),
        }
    }

    pub(super) fn params(&self) -> [&(dyn ToSql + Sync); 8] {
        let (key, [lease_until, now, expires_at]) = (&self.request.key, &self.times);
        [
            &key.tenant,
            &key.tool,
            &key.key,
            &self.request.request_hash,
            &self.request.tool_call_id,
            lease_until,
            now,
            expires_at,
        ]
    }
}

/// What a careful transaction writes last, under the chains' locks: its audit entries (numbered
/// and hashed by the database after their chains' heads, `gatehouse_append`), and its plugin
/// changes (numbered after the last, under chain 0's lock, which is taken first so the locks
/// go in ascending order). Taken last, the locks are held by a transaction that waits for no
/// row.
#[derive(Default)]
pub(super) struct Last<'a> {
    events: Vec<Cow<'a, AuditEvent>>,
    changes: Vec<&'a PluginChange>,
}

impl Last<'_> {
    pub(super) async fn write(
        &self,
        txn: &Transaction<'_>,
        sql: &Statements,
    ) -> Result<(), tokio_postgres::Error> {
        if !self.changes.is_empty() {
            txn.execute(&sql.lock, &[&WRITE_LOCK]).await?;
        }
        let entries = Entries::of(self.events.iter().map(|event| &**event), sql.chains);
        if !entries.is_empty() {
            txn.query_one(&sql.append, &entries.params()).await?;
        }
        for change in &self.changes {
            txn.execute(
                "INSERT INTO plugin_changes (seq, at, plugin, change) \
                 VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM plugin_changes), $1, $2, $3)",
                &[
                    &to_db(crate::records::now_ms()),
                    &change.plugin(),
                    &serde_json::to_string(change).expect("a plugin change serializes"),
                ],
            )
            .await?;
        }
        Ok(())
    }
}

/// Audit events as the columns `gatehouse_append` takes, one array each: each event's chain,
/// its columns, and its columns framed for the hash ([`audit::framed_columns`]).
pub(super) struct Entries<'e> {
    chain: Vec<i32>,
    at: Vec<i64>,
    kind: Vec<&'e str>,
    ids: [Vec<Option<&'e str>>; 5],
    record: Vec<&'e str>,
    framed: Vec<Vec<u8>>,
}

impl<'e> Entries<'e> {
    pub(super) fn of(events: impl Iterator<Item = &'e AuditEvent>, chains: u32) -> Self {
        let mut entries = Self {
            chain: Vec::new(),
            at: Vec::new(),
            kind: Vec::new(),
            ids: Default::default(),
            record: Vec::new(),
            framed: Vec::new(),
        };
        for event in events {
            let chain = audit::chain_of(event.tenant.as_deref(), chains);
            entries
                .chain
                .push(i32::try_from(chain).expect("at most MAX_CHAINS chains"));
            entries.at.push(to_db(event.at_ms));
            entries.kind.push(&event.kind);
            for (column, id) in entries.ids.iter_mut().zip(event.ids()) {
                column.push(id);
            }
            entries.record.push(&event.record);
            entries.framed.push(audit::framed_columns(event));
        }
        entries
    }

    pub(super) fn is_empty(&self) -> bool {
        self.record.is_empty()
    }

    pub(super) fn params(&self) -> [&(dyn ToSql + Sync); 11] {
        let [tool_call_id, tenant, principal, tool, outcome] = &self.ids;
        [
            &WRITE_LOCK,
            &self.chain,
            &self.at,
            &self.kind,
            tool_call_id,
            tenant,
            principal,
            tool,
            outcome,
            &self.record,
            &self.framed,
        ]
    }
}

/// One job inside the batch's transaction. The outer error is SQL's (the transaction is lost);
/// the inner one is the job's own refusal (nothing was written).
pub(super) async fn apply<'a>(
    txn: &Transaction<'_>,
    sql: &Statements,
    last: &mut Last<'a>,
    op: &'a Op,
) -> Result<Result<Done, StoreError>, tokio_postgres::Error> {
    let done = match op {
        Op::Claim(request) => match inside(claim(txn, sql, request).await)? {
            Ok(claim) => Done::Claim(claim),
            Err(damaged) => return Ok(Err(damaged)),
        },
        Op::Record(record) => {
            last.events.push(Cow::Borrowed(&record.audit));
            in_order(record_writes(txn, sql, record, op)).await?;
            Done::Unit
        }
        Op::Propose(proposal) => match inside(propose(txn, proposal).await)? {
            Ok(approval) => Done::Approval(Box::new(approval)),
            Err(damaged) => return Ok(Err(damaged)),
        },
        Op::Decide(decision) => match decide(txn, last, decision).await? {
            Ok(done) => done,
            Err(refused) => return Ok(Err(refused)),
        },
        Op::SetWaiting {
            approval_id,
            waiting,
        } => {
            if set_waiting(txn, approval_id, waiting).await? == 0 {
                return Ok(Err(jobs::unknown_approval(approval_id)));
            }
            Done::Unit
        }
        Op::CreateTask(task) => match create_task(txn, task).await? {
            Ok(()) => Done::Task(Some(Box::new(task.clone()))),
            Err(refused) => return Ok(Err(refused)),
        },
        Op::UpdateTask(update) => match update_task(txn, update).await? {
            Ok(task) => Done::Task(task.map(Box::new)),
            Err(damaged) => return Ok(Err(damaged)),
        },
        Op::Resolve {
            key,
            resolution,
            by,
            now_ms,
        } => {
            let row = txn
                .query_opt(
                    "SELECT state, lease_until, tool_call_id FROM idempotency WHERE tenant = $1 AND tool = $2 AND key = $3",
                    &[&key.tenant, &key.tool, &key.key],
                )
                .await?;
            let Some(row) = row else {
                return Ok(Err(jobs::unknown_key(key)));
            };
            let (state, lease_until, holder): (String, i64, String) =
                (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            if let Err(refused) = jobs::check_resolvable(key, &state, from_db(lease_until), *now_ms)
            {
                return Ok(Err(refused));
            }
            let change = match resolution {
                Resolution::Release => {
                    "DELETE FROM idempotency WHERE tenant = $1 AND tool = $2 AND key = $3"
                }
                Resolution::Done => {
                    "UPDATE idempotency SET state = 'complete', result = NULL WHERE tenant = $1 AND tool = $2 AND key = $3"
                }
            };
            txn.execute(change, &[&key.tenant, &key.tool, &key.key])
                .await?;
            last.events.push(Cow::Owned(jobs::resolution_event(
                key,
                *resolution,
                by,
                *now_ms,
                holder,
            )));
            txn.query_one(&sql.notify, &[&CHANNEL, &Waiters::digest(key)])
                .await?;
            Done::Unit
        }
        Op::Prune(now_ms) => {
            let now = to_db(*now_ms);
            let keys = txn
                .execute(
                    "DELETE FROM idempotency WHERE state = 'complete' AND expires_at <= $1",
                    &[&now],
                )
                .await?;
            let tasks = txn
                .execute("DELETE FROM tasks WHERE expires_at < $1", &[&now])
                .await?;
            let sessions = txn
                .execute("DELETE FROM sessions WHERE expires_at < $1", &[&now])
                .await?;
            let flows = txn
                .execute("DELETE FROM authorizations WHERE expires_at < $1", &[&now])
                .await?;
            Done::Count(keys + tasks + sessions + flows)
        }
        Op::Flush => Done::Unit,
        Op::AddCheckpoint(checkpoint) => {
            txn.execute(
                &format!(
                    "INSERT INTO audit_checkpoints ({CHECKPOINT_COLUMNS}) VALUES ($1, $2, $3, $4, $5)"
                ),
                &[
                    &to_db(checkpoint.seq),
                    &checkpoint.hash,
                    &to_db(checkpoint.at_ms),
                    &checkpoint.key_id,
                    &checkpoint.signature,
                ],
            )
            .await?;
            Done::Unit
        }
        Op::AddPluginChange(change) => {
            last.changes.push(change);
            Done::Unit
        }
        Op::RecordServed(served) => {
            for (served, how) in served {
                record_served(txn, served, *how).await?;
            }
            Done::Unit
        }
        Op::StartSession { session, replaces } => Done::Count(
            txn.execute(
                &format!(
                    "INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $4, $5, NULL, '[]') \
                     ON CONFLICT (tenant, principal, key) DO UPDATE SET started_at = excluded.started_at, \
                     last_at = excluded.last_at, expires_at = excluded.expires_at, ended_at = NULL, \
                     labels = '[]' WHERE sessions.started_at = $6::bigint"
                ),
                &[
                    &session.key.tenant,
                    &session.key.principal,
                    &session.key.key,
                    &to_db(session.started_ms),
                    &to_db(session.expires_ms),
                    &replaces.map(to_db),
                ],
            )
            .await?,
        ),
        Op::EndSession { key, at_ms } => Done::Count(
            txn.execute(
                "UPDATE sessions SET ended_at = $4 \
                 WHERE tenant = $1 AND principal = $2 AND key = $3 AND ended_at IS NULL",
                &[&key.tenant, &key.principal, &key.key, &to_db(*at_ms)],
            )
            .await?,
        ),
        Op::PutConnection(c) => {
            txn.execute(
                &format!(
                    "INSERT INTO connections ({CONNECTION_COLUMNS}) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                     ON CONFLICT (tenant, principal, provider) DO UPDATE SET \
                     resource = excluded.resource, sealed = excluded.sealed, \
                     token_hash = excluded.token_hash, scope = excluded.scope, \
                     expires_at = excluded.expires_at, updated_at = excluded.updated_at, \
                     refreshing_until = NULL"
                ),
                &[
                    &c.key.tenant,
                    &c.key.principal,
                    &c.key.provider,
                    &c.resource,
                    &c.sealed,
                    &c.token_hash,
                    &c.scope,
                    &c.expires_at_ms.map(to_db),
                    &to_db(c.created_at_ms),
                    &to_db(c.updated_at_ms),
                ],
            )
            .await?;
            Done::Unit
        }
        Op::DeleteConnection(key) => Done::Count(
            txn.execute(
                "DELETE FROM connections WHERE tenant = $1 AND principal = $2 AND provider = $3",
                &[&key.tenant, &key.principal, &key.provider],
            )
            .await?,
        ),
        Op::LeaseConnection {
            key,
            token_hash,
            now_ms,
            until_ms,
        } => Done::Count(
            txn.execute(
                "UPDATE connections SET refreshing_until = $5 \
                 WHERE tenant = $1 AND principal = $2 AND provider = $3 AND token_hash = $4 \
                   AND (refreshing_until IS NULL OR refreshing_until < $6)",
                &[
                    &key.tenant,
                    &key.principal,
                    &key.provider,
                    token_hash,
                    &to_db(*until_ms),
                    &to_db(*now_ms),
                ],
            )
            .await?,
        ),
        Op::BeginAuthorization(flow) => {
            txn.execute(
                &format!(
                    "INSERT INTO authorizations ({AUTHORIZATION_COLUMNS}) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
                ),
                &[
                    &flow.state_hash,
                    &flow.key.tenant,
                    &flow.key.principal,
                    &flow.key.provider,
                    &flow.resource,
                    &flow.sealed_verifier,
                    &flow.tool,
                    &flow.browser_hash,
                    &to_db(flow.created_at_ms),
                    &to_db(flow.expires_at_ms),
                    &flow.call,
                ],
            )
            .await?;
            Done::Unit
        }
        Op::OpenAuthorization {
            state_hash,
            browser_hash,
            now_ms,
        } => {
            let row = txn
                .query_opt(
                    &format!(
                        "UPDATE authorizations SET browser_hash = $2 \
                         WHERE state_hash = $1 AND browser_hash IS NULL AND expires_at >= $3 \
                         RETURNING {AUTHORIZATION_COLUMNS}"
                    ),
                    &[state_hash, browser_hash, &to_db(*now_ms)],
                )
                .await?;
            match inside(row.as_ref().map(rows::authorization).transpose())? {
                Ok(flow) => Done::Authorization(flow.map(Box::new)),
                Err(corrupt) => return Ok(Err(corrupt)),
            }
        }
        Op::TakeAuthorization { state_hash, now_ms } => {
            let row = txn
                .query_opt(
                    &format!(
                        "DELETE FROM authorizations WHERE state_hash = $1 \
                         RETURNING {AUTHORIZATION_COLUMNS}"
                    ),
                    &[state_hash],
                )
                .await?;
            match inside(row.as_ref().map(rows::authorization).transpose())? {
                Ok(flow) => Done::Authorization(
                    flow.filter(|f| f.expires_at_ms >= *now_ms && f.browser_hash.is_some())
                        .map(Box::new),
                ),
                Err(corrupt) => return Ok(Err(corrupt)),
            }
        }
    };
    Ok(Ok(done))
}

/// The labels a call's result brought join its session, if the session is still the one the
/// call found: each label it does not hold, after the ones it does (in one statement, so a
/// concurrent call adding the same label adds it once). A labels column that is not JSON fails
/// the transaction: a session never loses its labels.
const JOIN_LABELS: &str = "UPDATE sessions SET last_at = greatest(last_at, $6), labels = ( \
       SELECT coalesce(jsonb_agg(e ORDER BY o), '[]'::jsonb)::text FROM ( \
         SELECT h.e, h.o FROM jsonb_array_elements(sessions.labels::jsonb) WITH ORDINALITY AS h(e, o) \
         UNION ALL \
         SELECT b.e, 1000000 + b.o FROM jsonb_array_elements($5::text::jsonb) WITH ORDINALITY AS b(e, o) \
         WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(sessions.labels::jsonb) AS x(e) \
                           WHERE x.e ->> 'label' = b.e ->> 'label') \
       ) AS joined) \
     WHERE tenant = $1 AND principal = $2 AND key = $3 AND started_at = $4";

/// The session under `key` as stored, without its actions.
pub(super) async fn session(
    client: &impl GenericClient,
    key: &SessionKey,
) -> Result<Option<Session>, PgError> {
    let row = client
        .query_opt(
            &format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant = $1 AND principal = $2 AND key = $3"
            ),
            &[&key.tenant, &key.principal, &key.key],
        )
        .await?;
    row.as_ref().map(rows::session).transpose()
}

/// The condition on `audit` that selects a session's call entries: $1 tenant, $2 principal,
/// $3 key, $4 its start. The session id's expression is the index's (`audit_by_session`).
const SESSION_CALLS: &str = "tenant = $1 AND principal = $2 \
     AND coalesce(record::jsonb -> 'call' ->> 'session_id', '') = $3 \
     AND kind = 'call' AND tool IS NOT NULL AND at >= $4";

/// A session's last `limit` actions, oldest first.
pub(super) async fn session_actions(
    client: &impl GenericClient,
    session: &Session,
    limit: usize,
) -> Result<Vec<SessionAction>, PgError> {
    let rows = client
        .query(
            &format!(
                "SELECT tool, at, tool_call_id FROM audit WHERE {SESSION_CALLS} \
                 ORDER BY seq DESC LIMIT $5"
            ),
            &[
                &session.key.tenant,
                &session.key.principal,
                &session.key.key,
                &to_db(session.started_ms),
                &i64::try_from(limit).unwrap_or(i64::MAX),
            ],
        )
        .await?;
    let mut actions = rows
        .iter()
        .map(|row| {
            Ok(SessionAction {
                tool: row.text(0)?,
                tool_call_id: row.text_or_null(2)?.unwrap_or_default(),
                at_ms: from_db(row.int(1)?),
            })
        })
        .collect::<Result<Vec<_>, PgError>>()?;
    actions.reverse();
    Ok(actions)
}

/// A session's call entries, newest first, at most `limit` (0: all).
pub(super) async fn session_entries(
    client: &impl GenericClient,
    session: &Session,
    limit: usize,
) -> Result<Vec<AuditEntry>, PgError> {
    let limit = (limit > 0).then(|| i64::try_from(limit).unwrap_or(i64::MAX));
    let rows = client
        .query(
            &format!(
                "SELECT {} FROM audit WHERE {SESSION_CALLS} ORDER BY seq DESC LIMIT $5",
                audit_columns()
            ),
            &[
                &session.key.tenant,
                &session.key.principal,
                &session.key.key,
                &to_db(session.started_ms),
                &limit,
            ],
        )
        .await?;
    rows.iter().map(audit_entry).collect()
}

/// Sessions `filter` selects, the most recently started first.
pub(super) async fn sessions(
    client: &impl GenericClient,
    filter: &SessionFilter,
) -> Result<Vec<Session>, PgError> {
    let limit = (filter.limit > 0).then(|| i64::try_from(filter.limit).unwrap_or(i64::MAX));
    let rows = client
        .query(
            &format!(
                "SELECT {SESSION_COLUMNS} FROM sessions \
                 WHERE ($1::text IS NULL OR tenant = $1) AND ($2::text IS NULL OR principal = $2) \
                 ORDER BY started_at DESC, tenant, principal, key LIMIT $3"
            ),
            &[&filter.tenant, &filter.principal, &limit],
        )
        .await?;
    rows.iter().map(rows::session).collect()
}

/// A plugin that started serving: its row inserted if it has none, else locked, read and
/// replaced where [`jobs::replaces_served`] says. Of two gateways recording one plugin at
/// once, the second's insert waits for the first's commit and finds its row, which it then
/// judges as it stands.
async fn record_served(
    txn: &Transaction<'_>,
    served: &ServedVersion,
    how: ServedAs,
) -> Result<(), tokio_postgres::Error> {
    let at = to_db(served.at_ms);
    let columns: [&(dyn ToSql + Sync); 6] = [
        &served.kind,
        &served.plugin,
        &served.version,
        &served.digest,
        &served.source,
        &at,
    ];
    let inserted = txn
        .execute(
            &format!(
                "INSERT INTO served_versions ({SERVED_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (kind, plugin) DO NOTHING"
            ),
            &columns,
        )
        .await?;
    if inserted == 1 {
        return Ok(());
    }
    let recorded: Option<String> = txn
        .query_opt(
            "SELECT version FROM served_versions WHERE kind = $1 AND plugin = $2 FOR UPDATE",
            &columns[..2],
        )
        .await?
        .map(|row| row.try_get(0))
        .transpose()?;
    if jobs::replaces_served(recorded.as_deref(), served, how) {
        txn.execute(
            "UPDATE served_versions SET version = $3, digest = $4, source = $5, at = $6 \
             WHERE kind = $1 AND plugin = $2",
            &columns,
        )
        .await?;
    }
    Ok(())
}

/// A claim of a key that already has a row (the careful transaction's): the row locked and
/// judged, then written as [`jobs::judge`] says.
async fn claim(
    txn: &Transaction<'_>,
    sql: &Statements,
    request: &ClaimRequest,
) -> Result<Claim, PgError> {
    let key = &request.key;
    let now = crate::records::now_ms();
    let existing = txn
        .query_opt(&sql.find_key, &[&key.tenant, &key.tool, &key.key])
        .await?
        .map(|row| rows::key_row(&row))
        .transpose()?;
    match jobs::judge(existing, request, now) {
        Judgement::Answer(claim) => Ok(claim),
        Judgement::Indeterminate(claim) => {
            txn.execute(&sql.stuck_key, &[&key.tenant, &key.tool, &key.key])
                .await?;
            Ok(claim)
        }
        Judgement::Take => {
            txn.execute(&sql.take_key, &NewClaim::of(request, now).params())
                .await?;
            Ok(Claim::Run)
        }
    }
}

/// A decision: a conditional update from `pending`, so it applies only if no other decision
/// did first. Under PostgreSQL's read committed isolation, an update racing another
/// transaction's decision waits for its commit, then finds the approval no longer `pending`
/// and changes nothing. A refused decision (by the rules, or because another came first)
/// appends its `approval_refused` entry and is answered [`Done::Refused`]. The inner error:
/// nothing was written.
async fn decide(
    txn: &Transaction<'_>,
    last: &mut Last<'_>,
    decision: &Decision,
) -> Result<Result<Done, StoreError>, tokio_postgres::Error> {
    let approval = match inside(approval_where(txn, "id = $1", &[&decision.id]).await)? {
        Ok(Some(approval)) => approval,
        Ok(None) => return Ok(Err(jobs::unknown_approval(&decision.id))),
        Err(damaged) => return Ok(Err(damaged)),
    };
    let mut refuse = |why: String| -> Result<Result<Done, StoreError>, tokio_postgres::Error> {
        let event = jobs::refusal_event(&approval, decision, &why);
        last.events.push(Cow::Owned(event));
        Ok(Ok(Done::Refused(why)))
    };
    let status = match jobs::check_decision(&approval, decision) {
        Ok(status) => status,
        Err(why) => return refuse(why),
    };
    let updated = txn
        .execute(
            "UPDATE approvals SET status = $1, decided_by = $2, decided_reason = $3, decided_at = $4, \
             decided_as = $5 WHERE id = $6 AND status = 'pending'",
            &[
                &status.as_str(),
                &decision.by,
                &decision.reason,
                &to_db(decision.now_ms),
                &decision.decided_as.as_str(),
                &decision.id,
            ],
        )
        .await?;
    if updated == 0 {
        // Read again: a statement sees what committed before it, so the decision that won.
        let now = match inside(approval_where(txn, "id = $1", &[&decision.id]).await)? {
            Ok(now) => now,
            Err(damaged) => return Ok(Err(damaged)),
        };
        return refuse(jobs::lost_race(now.as_ref(), decision));
    }
    last.events.push(Cow::Owned(jobs::decision_event(
        &approval, decision, status,
    )));
    Ok(
        match inside(approval_where(txn, "id = $1", &[&decision.id]).await)? {
            Ok(Some(approval)) => Ok(Done::Approval(Box::new(approval))),
            Ok(None) => Err(jobs::unknown_approval(&decision.id)),
            Err(damaged) => Err(damaged),
        },
    )
}

/// Sets how an approval's caller waits; how many approvals it changed (0: no such approval).
async fn set_waiting(
    txn: &Transaction<'_>,
    approval_id: &str,
    waiting: &Waiting,
) -> Result<u64, tokio_postgres::Error> {
    let (on, until, task) = rows::waiting_columns(waiting);
    txn.execute(
        "UPDATE approvals SET waiting_on = $1, waiting_until = $2, waiting_task = $3 WHERE id = $4",
        &[&on, &until, &task, &approval_id],
    )
    .await
}

/// A new task and, when it waits on an approval, the approval marked as waited on by it. The
/// inner error: nothing was written.
async fn create_task(
    txn: &Transaction<'_>,
    task: &Task,
) -> Result<Result<(), StoreError>, tokio_postgres::Error> {
    if txn
        .query_opt("SELECT 1 FROM tasks WHERE id = $1", &[&task.id])
        .await?
        .is_some()
    {
        return Ok(Err(jobs::task_exists(&task.id)));
    }
    if let Some(approval_id) = &task.approval_id {
        let waiting = Waiting::Task {
            id: task.id.clone(),
        };
        if set_waiting(txn, approval_id, &waiting).await? == 0 {
            return Ok(Err(jobs::unknown_approval(approval_id)));
        }
    }
    let (call, result) = rows::task_json(task);
    txn.execute(
        &format!(
            "INSERT INTO tasks ({TASK_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        ),
        &[
            &task.id,
            &task.tenant,
            &task.principal,
            &task.tool,
            &task.approval_id,
            &call,
            &task.status.as_str(),
            &task.status_message,
            &result,
            &to_db(task.created_at_ms),
            &to_db(task.updated_at_ms),
            &to_db(task.expires_at_ms),
        ],
    )
    .await?;
    Ok(Ok(()))
}

/// A task's update, if it applies ([`jobs::updated_task`]): written only while the task is
/// still in the status it was read in (an update racing another's from the same status waits
/// for its commit, then finds the task in another status and changes nothing).
async fn update_task(
    txn: &Transaction<'_>,
    update: &TaskUpdate,
) -> Result<Result<Option<Task>, StoreError>, tokio_postgres::Error> {
    let task = match inside(task_by_id(txn, &update.id).await)? {
        Ok(Some(task)) => task,
        Ok(None) => return Ok(Ok(None)),
        Err(damaged) => return Ok(Err(damaged)),
    };
    let Some(updated) = jobs::updated_task(&task, update) else {
        return Ok(Ok(None));
    };
    let (_, result) = rows::task_json(&updated);
    let written = txn
        .execute(
            "UPDATE tasks SET status = $1, status_message = $2, result = $3, updated_at = $4 \
             WHERE id = $5 AND status = $6",
            &[
                &updated.status.as_str(),
                &updated.status_message,
                &result,
                &to_db(updated.updated_at_ms),
                &updated.id,
                &task.status.as_str(),
            ],
        )
        .await?;
    Ok(Ok((written == 1).then_some(updated)))
}

/// Proposes an approval, or finds the one its key already has.
async fn propose(txn: &Transaction<'_>, proposal: &Approval) -> Result<Approval, PgError> {
    if let Some(key) = &proposal.idempotency_key
        && let Some(existing) = approval_where(
            txn,
            "tenant = $1 AND tool = $2 AND idempotency_key = $3",
            &[&proposal.tenant, &proposal.tool, key],
        )
        .await?
    {
        return Ok(existing);
    }
    let (waiting_on, waiting_until, waiting_task) = rows::waiting_columns(&proposal.waiting);
    txn.execute(
        &format!(
            "INSERT INTO approvals ({APPROVAL_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, $11, NULL, NULL, NULL, NULL, \
                     NULL, $12, $13, $14)"
        ),
        &[
            &proposal.id,
            &proposal.tenant,
            &proposal.tool,
            &proposal.idempotency_key,
            &proposal.request_hash,
            &proposal.call.to_string(),
            &rows::strings_json(&proposal.principals),
            &proposal.mode,
            &rows::strings_json(&proposal.reasons),
            &to_db(proposal.created_at_ms),
            &to_db(proposal.expires_at_ms),
            &waiting_on,
            &waiting_until,
            &waiting_task,
        ],
    )
    .await?;
    let mut stored = proposal.clone();
    stored.status = ApprovalStatus::Pending;
    stored.decided_by = None;
    stored.decided_reason = None;
    stored.decided_at_ms = None;
    stored.executed_by_call = None;
    stored.decided_as = None;
    Ok(stored)
}

/// The one approval matching `condition`, read with whatever client or transaction.
pub(super) async fn approval_where(
    client: &impl GenericClient,
    condition: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Approval>, PgError> {
    client
        .query_opt(
            &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE {condition}"),
            params,
        )
        .await?
        .map(|row| rows::approval(&row))
        .transpose()
}

/// A task by id, read with whatever client or transaction.
pub(super) async fn task_by_id(
    client: &impl GenericClient,
    id: &str,
) -> Result<Option<Task>, PgError> {
    client
        .query_opt(
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1"),
            &[&id],
        )
        .await?
        .map(|row| rows::task(&row))
        .transpose()
}

/// The tasks `filter` selects, newest first (then by id, descending), before its cursor.
pub(super) async fn tasks(
    client: &impl GenericClient,
    filter: &TaskFilter,
) -> Result<Vec<Task>, PgError> {
    let limit = if filter.limit == 0 { 100 } else { filter.limit };
    let statuses: Option<Vec<&str>> = (!filter.statuses.is_empty()).then(|| {
        filter
            .statuses
            .iter()
            .map(|status| status.as_str())
            .collect()
    });
    let (before_at, before_id): (Option<i64>, Option<&str>) = filter
        .before
        .as_ref()
        .map(|(at, id)| (to_db(*at), id.as_str()))
        .unzip();
    let rows = client
        .query(
            &format!(
                "SELECT {TASK_COLUMNS} FROM tasks \
                 WHERE ($1::text IS NULL OR tenant = $1) AND ($2::text IS NULL OR principal = $2) \
                   AND ($3::text[] IS NULL OR status = ANY($3)) \
                   AND ($4::text IS NULL OR approval_id = $4) \
                   AND ($5::bigint IS NULL OR (created_at, id) < ($5, $6::text)) \
                 ORDER BY created_at DESC, id DESC LIMIT $7"
            ),
            &[
                &filter.tenant,
                &filter.principal,
                &statuses,
                &filter.approval_id,
                &before_at,
                &before_id,
                &i64::try_from(limit).unwrap_or(i64::MAX),
            ],
        )
        .await?;
    rows.iter().map(rows::task).collect()
}

/// The columns an entry is read with: [`AUDIT_COLUMNS`], then its chain and link.
fn audit_columns() -> String {
    format!("{AUDIT_COLUMNS}, chain, link")
}

/// The approvals `filter` selects, newest first.
pub(super) async fn approvals(
    client: &impl GenericClient,
    filter: &ApprovalFilter,
) -> Result<Vec<Approval>, PgError> {
    let limit = if filter.limit == 0 { 100 } else { filter.limit };
    let rows = client
        .query(
            &format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals \
                 WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR tenant = $2) \
                 ORDER BY created_at DESC, id LIMIT $3"
            ),
            &[
                &filter.status.map(ApprovalStatus::as_str),
                &filter.tenant,
                &i64::try_from(limit).unwrap_or(i64::MAX),
            ],
        )
        .await?;
    rows.iter().map(rows::approval).collect()
}

/// Every idempotency record, oldest first, as operators see it at `now_ms`.
pub(super) async fn keys(
    client: &impl GenericClient,
    now_ms: u64,
) -> Result<Vec<KeyRecord>, PgError> {
    let rows = client
        .query(
            &format!("SELECT {KEY_RECORD_COLUMNS} FROM idempotency ORDER BY created_at"),
            &[],
        )
        .await?;
    rows.iter()
        .map(|row| rows::key_record(row, now_ms))
        .collect()
}

/// The entries `query` selects, in order.
pub(super) async fn audit(
    client: &impl GenericClient,
    query: &AuditQuery,
) -> Result<Vec<AuditEntry>, PgError> {
    let limit = (query.limit > 0).then(|| i64::try_from(query.limit).unwrap_or(i64::MAX));
    let rows = client
        .query(
            &format!(
                "SELECT {} FROM audit \
                 WHERE ($1::text IS NULL OR tool_call_id = $1) AND ($2::text IS NULL OR tenant = $2) \
                   AND ($3::text IS NULL OR outcome = $3) AND ($4::bigint IS NULL OR at >= $4) \
                   AND ($5::bigint IS NULL OR at < $5) AND ($6::bigint IS NULL OR seq > $6) \
                   AND ($7::text IS NULL OR tool = $7) AND ($8::text IS NULL OR principal = $8) \
                   AND ($9::text IS NULL OR kind = $9) \
                   AND ($10::text IS NULL OR strpos(record, '\"replay_of\":' || to_json($10::text)::text) > 0) \
                   AND ($12::int IS NULL OR chain = $12) \
                 ORDER BY seq LIMIT $11",
                audit_columns()
            ),
            &[
                &query.tool_call_id,
                &query.tenant,
                &query.outcome,
                &query.since_ms.map(to_db),
                &query.until_ms.map(to_db),
                &query.after_seq.map(to_db),
                &query.tool,
                &query.principal,
                &query.kind,
                &query.replay_of,
                &limit,
                &query.chain.map(|chain| i32::try_from(chain).unwrap_or(i32::MAX)),
            ],
        )
        .await?;
    rows.iter().map(audit_entry).collect()
}

/// The stored checkpoints, oldest first.
pub(super) async fn checkpoints(client: &impl GenericClient) -> Result<Vec<Checkpoint>, PgError> {
    let rows = client.query(CHECKPOINTS_QUERY, &[]).await?;
    rows.iter().map(rows::checkpoint).collect()
}

/// The stored plugin changes' JSON, in order.
pub(super) async fn plugin_changes(client: &impl GenericClient) -> Result<Vec<String>, PgError> {
    let rows = client.query(PLUGIN_CHANGES_QUERY, &[]).await?;
    rows.iter().map(|row| row.text(0)).collect()
}

/// The recorded served versions, by kind, then id.
pub(super) async fn served_versions(
    client: &impl GenericClient,
) -> Result<Vec<ServedVersion>, PgError> {
    let rows = client.query(SERVED_QUERY, &[]).await?;
    rows.iter().map(rows::served_version).collect()
}

/// Pages through the log in one snapshot (a repeatable-read transaction): entries of
/// different chains are numbered before they commit, so a page read after another commit
/// could find a number the previous page skipped.
pub(super) async fn verify_audit(
    mut client: deadpool_postgres::Object,
) -> Result<VerifyReport, PgError> {
    let txn = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let statement = txn
        .prepare(&format!(
            "SELECT {} FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2",
            audit_columns()
        ))
        .await?;
    let mut chains = audit::Chains::default();
    let mut after = 0_i64;
    loop {
        let rows = txn.query(&statement, &[&after, &VERIFY_PAGE]).await?;
        for row in &rows {
            let entry = audit_entry(row)?;
            after = to_db(entry.seq);
            if !chains.check(entry) {
                return Ok(chains.report());
            }
        }
        if (rows.len() as i64) < VERIFY_PAGE {
            return Ok(chains.report());
        }
    }
}

/// A statement sent in a pipeline, and what it answered.
pub(super) type Pending<'a> =
    Pin<Box<dyn Future<Output = Result<Sent, tokio_postgres::Error>> + Send + 'a>>;

pub(super) enum Sent {
    Done,
    Count(u64),
}

/// Awaits `pending` together, having sent each (its first poll) in order: the statements go
/// to the server one behind the other without waiting for an answer, and run there in that
/// order, so a pipeline costs one round trip however long it is.
pub(super) async fn in_order(
    mut pending: Vec<Pending<'_>>,
) -> Result<Vec<Sent>, tokio_postgres::Error> {
    let mut answers: Vec<Option<Result<Sent, tokio_postgres::Error>>> =
        pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (statement, answer) in pending.iter_mut().zip(answers.iter_mut()) {
            if answer.is_none() {
                match statement.as_mut().poll(cx) {
                    Poll::Ready(done) => *answer = Some(done),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    answers
        .into_iter()
        .map(|answer| answer.expect("every statement answered"))
        .collect()
}

/// A record's writes besides its audit entry: its key completed or released, its approval
/// executed, and the notification of the key (delivered at commit).
pub(super) fn record_writes<'a, C: GenericClient + Sync>(
    client: &'a C,
    sql: &'a Statements,
    record: &'a CallRecord,
    op: &'a Op,
) -> Vec<Pending<'a>> {
    let call = record.audit.tool_call_id.as_deref();
    let mut pending: Vec<Pending<'a>> = Vec::new();
    if let Some((key, result)) = &record.completes {
        pending.push(Box::pin(async move {
            let updated = client
                .execute(
                    &sql.complete_key,
                    &[result, &key.tenant, &key.tool, &key.key, &call],
                )
                .await?;
            if updated == 0 {
                tracing::warn!(key = %key.key, tool = %key.tool, "the key's record was resolved by an operator while the call ran; its result is not stored");
            }
            Ok(Sent::Done)
        }));
    }
    if let Some(key) = &record.releases {
        pending.push(Box::pin(async move {
            client
                .execute(&sql.release_key, &[&key.tenant, &key.tool, &key.key, &call])
                .await
                .map(Sent::Count)
        }));
    }
    if let Some(id) = &record.executes {
        pending.push(Box::pin(async move {
            client
                .execute(
                    &sql.execute_approval,
                    &[&call, id, &to_db(record.audit.at_ms)],
                )
                .await
                .map(Sent::Count)
        }));
    }
    if let (Some(session), Some(tenant), Some(principal)) = (
        &record.session,
        &record.audit.tenant,
        &record.audit.principal,
    ) && let Some((started_ms, brought)) = &session.labels
    {
        pending.push(Box::pin(async move {
            client
                .execute(
                    JOIN_LABELS,
                    &[
                        tenant,
                        principal,
                        &session.key,
                        &to_db(*started_ms),
                        &crate::sessions::labels_json(brought),
                        &to_db(record.audit.at_ms),
                    ],
                )
                .await
                .map(Sent::Count)
        }));
    }
    if let Some(key) = op.wakes() {
        pending.push(Box::pin(async move {
            client
                .query_one(&sql.notify, &[&CHANNEL, &Waiters::digest(key)])
                .await
                .map(|_| Sent::Done)
        }));
    }
    pending
}

/// A principal's connection to a provider.
pub(super) async fn connection(
    client: &impl GenericClient,
    key: &ConnectionKey,
) -> Result<Option<Connection>, PgError> {
    let row = client
        .query_opt(
            &format!(
                "SELECT {CONNECTION_COLUMNS} FROM connections \
                 WHERE tenant = $1 AND principal = $2 AND provider = $3"
            ),
            &[&key.tenant, &key.principal, &key.provider],
        )
        .await?;
    row.as_ref().map(rows::connection).transpose()
}

/// The flow whose state hashes to `state_hash`, as stored (live or not).
pub(super) async fn authorization(
    client: &impl GenericClient,
    state_hash: &str,
) -> Result<Option<crate::connections::Authorization>, PgError> {
    let row = client
        .query_opt(
            &format!("SELECT {AUTHORIZATION_COLUMNS} FROM authorizations WHERE state_hash = $1"),
            &[&state_hash],
        )
        .await?;
    row.as_ref().map(rows::authorization).transpose()
}

/// Connections `filter` selects, by tenant, principal and provider.
pub(super) async fn connections(
    client: &impl GenericClient,
    filter: &ConnectionFilter,
) -> Result<Vec<Connection>, PgError> {
    let rows = client
        .query(
            &format!(
                "SELECT {CONNECTION_COLUMNS} FROM connections \
                 WHERE ($1::text IS NULL OR tenant = $1) AND ($2::text IS NULL OR principal = $2) \
                 AND ($3::text IS NULL OR provider = $3) ORDER BY tenant, principal, provider"
            ),
            &[&filter.tenant, &filter.principal, &filter.provider],
        )
        .await?;
    rows.iter().map(rows::connection).collect()
}
