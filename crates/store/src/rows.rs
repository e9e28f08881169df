//! The row mapping both backends share. SQLite and PostgreSQL keep the same tables with the
//! same columns (the portable migrations), so an approval, a task, an audit entry, a
//! checkpoint, a served version or an idempotency record is read from a row in one place,
//! here, through the little each backend provides: its rows' columns by position
//! ([`Columns`]). The column lists the queries name are here too, so a query and its mapping
//! cannot disagree on an order.
//!
//! A column holding what gatehouse never writes (a damaged or hand-edited row) is an error
//! naming the column ([`Corrupt`]), never a default value.

use serde_json::Value;

use super::audit::AuditEntry;
use crate::checkpoint::Checkpoint;
use crate::connections::{Authorization, Connection, ConnectionKey};
use crate::records::{
    Approval, ApprovalStatus, AuditEvent, DecidedAs, IdempotencyKey, KeyRecord, KeyState,
    ServedVersion, Task, TaskStatus, Waiting,
};
use crate::sessions::{Session, SessionKey};

/// The columns of an `approvals` row, in the order [`approval`] reads them (and both backends
/// insert them).
pub(super) const APPROVAL_COLUMNS: &str = "id, tenant, tool, idempotency_key, request_hash, call, principals, mode, \
     reasons, status, created_at, expires_at, decided_by, decided_reason, decided_at, executed_by_call, \
     decided_as, waiting_on, waiting_until, waiting_task";

/// The columns of a `tasks` row, in the order [`task`] reads them (and both backends insert
/// them).
pub(super) const TASK_COLUMNS: &str = "id, tenant, principal, tool, approval_id, call, status, \
     status_message, result, created_at, updated_at, expires_at";

/// The columns of an `audit` row, in the order [`audit_entry`] reads them.
pub(super) const AUDIT_COLUMNS: &str =
    "seq, at, kind, tool_call_id, tenant, principal, tool, outcome, record, prev_hash, hash";

/// The columns of an `audit_checkpoints` row, in the order [`checkpoint`] reads them (and both
/// backends write them).
pub(super) const CHECKPOINT_COLUMNS: &str = "seq, hash, at, key_id, signature";

/// The SQL that reads the stored checkpoints, oldest first.
pub(super) const CHECKPOINTS_QUERY: &str =
    "SELECT seq, hash, at, key_id, signature FROM audit_checkpoints ORDER BY seq, at";

/// The SQL that reads the stored plugin changes, in order (one column: the change's JSON).
pub(super) const PLUGIN_CHANGES_QUERY: &str = "SELECT change FROM plugin_changes ORDER BY seq";

/// The columns of a `served_versions` row, in the order [`served_version`] reads them (and both
/// backends insert them).
pub(super) const SERVED_COLUMNS: &str = "kind, plugin, version, digest, source, at";

/// The SQL that reads the recorded served versions, by kind, then id.
pub(super) const SERVED_QUERY: &str =
    "SELECT kind, plugin, version, digest, source, at FROM served_versions ORDER BY kind, plugin";

/// The columns of an `idempotency` row, in the order [`key_record`] reads them.
pub(super) const KEY_RECORD_COLUMNS: &str =
    "tenant, tool, key, state, tool_call_id, lease_until, created_at, expires_at";

/// The columns of an `idempotency` row a claim reads, in the order [`key_row`] reads them.
pub(super) const KEY_ROW_COLUMNS: &str =
    "request_hash, state, tool_call_id, lease_until, result, expires_at";

/// A column that holds what gatehouse never writes there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the store holds a damaged row: column {column} {problem}")]
pub(super) struct Corrupt {
    /// The column's position in the query.
    pub column: usize,
    /// What is wrong with it.
    pub problem: String,
}

/// One row of a query, as a backend returns it: its columns by position, read as the schema's
/// types (TEXT and BIGINT). A backend's error says why a column could not be read as asked.
pub(super) trait Columns {
    /// The backend's error; a [`Corrupt`] column becomes one.
    type Error: From<Corrupt>;

    /// A TEXT column that is never NULL.
    fn text(&self, column: usize) -> Result<String, Self::Error>;
    /// A TEXT column that may be NULL.
    fn text_or_null(&self, column: usize) -> Result<Option<String>, Self::Error>;
    /// A BIGINT column that is never NULL.
    fn int(&self, column: usize) -> Result<i64, Self::Error>;
    /// A BIGINT column that may be NULL.
    fn int_or_null(&self, column: usize) -> Result<Option<i64>, Self::Error>;
}

/// A time (unix ms) as the schema's BIGINT.
pub(super) fn to_db(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// A BIGINT time back as unix ms (a negative one reads as 0).
pub(super) fn from_db(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

/// The JSON text of a list of strings, as the `approvals` table keeps principals and reasons.
pub(super) fn strings_json(items: &[String]) -> String {
    Value::from(items.to_vec()).to_string()
}

/// How the `approvals` table keeps a [`Waiting`]: `waiting_on`, `waiting_until` (held until,
/// unix ms) and `waiting_task`, in that order.
pub(super) fn waiting_columns(waiting: &Waiting) -> (&'static str, Option<i64>, Option<&str>) {
    match waiting {
        Waiting::Retry => (waiting.as_str(), None, None),
        Waiting::Held { until_ms } => (waiting.as_str(), Some(to_db(*until_ms)), None),
        Waiting::Task { id } => (waiting.as_str(), None, Some(id)),
    }
}

/// The value of JSON column `column`, as the tables keep calls and results.
fn json(column: usize, text: &str) -> Result<Value, Corrupt> {
    serde_json::from_str(text).map_err(|e| Corrupt {
        column,
        problem: format!("is not JSON: {e}"),
    })
}

/// A [`Waiting`] from its three columns, starting at `column` ([`waiting_columns`]); a NULL
/// `waiting_on` (a row from before it was kept) is [`Waiting::Retry`].
fn waiting<R: Columns>(row: &R, column: usize) -> Result<Waiting, R::Error> {
    let missing = |at: usize, on: &str| Corrupt {
        column: at,
        problem: format!("is NULL for an approval waiting on `{on}`"),
    };
    Ok(match row.text_or_null(column)?.as_deref() {
        None | Some("retry") => Waiting::Retry,
        Some("held") => Waiting::Held {
            until_ms: from_db(
                row.int_or_null(column + 1)?
                    .ok_or_else(|| missing(column + 1, "held"))?,
            ),
        },
        Some("task") => Waiting::Task {
            id: row
                .text_or_null(column + 2)?
                .ok_or_else(|| missing(column + 2, "task"))?,
        },
        Some(other) => {
            return Err(Corrupt {
                column,
                problem: format!("holds the unknown way of waiting `{other}`"),
            }
            .into());
        }
    })
}

/// An approval, from a row of [`APPROVAL_COLUMNS`].
pub(super) fn approval<R: Columns>(row: &R) -> Result<Approval, R::Error> {
    let strings = |column: usize| -> Result<Vec<String>, R::Error> {
        let text = row.text(column)?;
        serde_json::from_str(&text).map_err(|e| {
            R::Error::from(Corrupt {
                column,
                problem: format!("is not a JSON list of strings: {e}"),
            })
        })
    };
    let status = row.text(9)?;
    let decided_as = match row.text_or_null(16)? {
        None => None,
        Some(text) => Some(DecidedAs::parse(&text).ok_or_else(|| Corrupt {
            column: 16,
            problem: format!("holds the unknown capacity of a decider `{text}`"),
        })?),
    };
    Ok(Approval {
        id: row.text(0)?,
        tenant: row.text(1)?,
        tool: row.text(2)?,
        idempotency_key: row.text_or_null(3)?,
        request_hash: row.text(4)?,
        call: json(5, &row.text(5)?)?,
        principals: strings(6)?,
        mode: row.text(7)?,
        reasons: strings(8)?,
        status: ApprovalStatus::parse(&status).ok_or_else(|| Corrupt {
            column: 9,
            problem: format!("holds the unknown approval status `{status}`"),
        })?,
        created_at_ms: from_db(row.int(10)?),
        expires_at_ms: from_db(row.int(11)?),
        decided_by: row.text_or_null(12)?,
        decided_reason: row.text_or_null(13)?,
        decided_at_ms: row.int_or_null(14)?.map(from_db),
        executed_by_call: row.text_or_null(15)?,
        decided_as,
        waiting: waiting(row, 17)?,
    })
}

/// A task, from a row of [`TASK_COLUMNS`].
pub(super) fn task<R: Columns>(row: &R) -> Result<Task, R::Error> {
    let status = row.text(6)?;
    Ok(Task {
        id: row.text(0)?,
        tenant: row.text(1)?,
        principal: row.text(2)?,
        tool: row.text(3)?,
        approval_id: row.text_or_null(4)?,
        call: json(5, &row.text(5)?)?,
        status: TaskStatus::parse(&status).ok_or_else(|| Corrupt {
            column: 6,
            problem: format!("holds the unknown task status `{status}`"),
        })?,
        status_message: row.text_or_null(7)?,
        result: match row.text_or_null(8)? {
            Some(text) => Some(json(8, &text)?),
            None => None,
        },
        created_at_ms: from_db(row.int(9)?),
        updated_at_ms: from_db(row.int(10)?),
        expires_at_ms: from_db(row.int(11)?),
    })
}

/// A task's JSON columns as the `tasks` table keeps them: its call, and its result if any.
pub(super) fn task_json(task: &Task) -> (String, Option<String>) {
    (
        task.call.to_string(),
        task.result.as_ref().map(Value::to_string),
    )
}

/// An audit entry, from a row of [`AUDIT_COLUMNS`], in chain 0 with its `link` its `seq` (as
/// SQLite keeps the log); a backend that partitions the log sets both from its own columns.
pub(super) fn audit_entry<R: Columns>(row: &R) -> Result<AuditEntry, R::Error> {
    let seq = from_db(row.int(0)?);
    Ok(AuditEntry {
        seq,
        chain: 0,
        link: seq,
        event: AuditEvent {
            at_ms: from_db(row.int(1)?),
            kind: row.text(2)?,
            tool_call_id: row.text_or_null(3)?,
            tenant: row.text_or_null(4)?,
            principal: row.text_or_null(5)?,
            tool: row.text_or_null(6)?,
            outcome: row.text_or_null(7)?,
            record: row.text(8)?,
        },
        prev_hash: row.text(9)?,
        hash: row.text(10)?,
    })
}

/// The columns [`session`] reads, in order.
pub(super) const SESSION_COLUMNS: &str =
    "tenant, principal, key, started_at, last_at, expires_at, ended_at, labels";

/// A session without its actions, from a row of [`SESSION_COLUMNS`].
pub(super) fn session<R: Columns>(row: &R) -> Result<Session, R::Error> {
    let labels = crate::sessions::labels_of(&row.text(7)?).map_err(|e| Corrupt {
        column: 7,
        problem: format!("(a session's labels) does not parse: {e}"),
    })?;
    Ok(Session {
        key: SessionKey {
            tenant: row.text(0)?,
            principal: row.text(1)?,
            key: row.text(2)?,
        },
        started_ms: from_db(row.int(3)?),
        last_ms: from_db(row.int(4)?),
        expires_ms: from_db(row.int(5)?),
        ended_ms: row.int_or_null(6)?.map(from_db),
        labels,
        actions: Vec::new(),
    })
}

/// A signed checkpoint, from a row of [`CHECKPOINT_COLUMNS`].
pub(super) fn checkpoint<R: Columns>(row: &R) -> Result<Checkpoint, R::Error> {
    Ok(Checkpoint {
        seq: from_db(row.int(0)?),
        hash: row.text(1)?,
        at_ms: from_db(row.int(2)?),
        key_id: row.text(3)?,
        signature: row.text(4)?,
    })
}

/// A recorded served version, from a row of [`SERVED_COLUMNS`].
pub(super) fn served_version<R: Columns>(row: &R) -> Result<ServedVersion, R::Error> {
    Ok(ServedVersion {
        kind: row.text(0)?,
        plugin: row.text(1)?,
        version: row.text(2)?,
        digest: row.text(3)?,
        source: row.text_or_null(4)?,
        at_ms: from_db(row.int(5)?),
    })
}

/// An idempotency record as operators see it, from a row of [`KEY_RECORD_COLUMNS`], at
/// `now_ms` (an `in_progress` row past its lease is `indeterminate`).
pub(super) fn key_record<R: Columns>(row: &R, now_ms: u64) -> Result<KeyRecord, R::Error> {
    let state = row.text(3)?;
    Ok(KeyRecord {
        key: IdempotencyKey {
            tenant: row.text(0)?,
            tool: row.text(1)?,
            key: row.text(2)?,
        },
        state: key_state(&state, from_db(row.int(5)?), now_ms),
        tool_call_id: row.text(4)?,
        created_at_ms: from_db(row.int(6)?),
        expires_at_ms: from_db(row.int(7)?),
    })
}

/// How operators see a row's state: `in_progress` past its lease is `indeterminate`.
pub(super) fn key_state(state: &str, lease_until_ms: u64, now_ms: u64) -> KeyState {
    match state {
        "complete" => KeyState::Complete,
        "in_progress" if lease_until_ms > now_ms => KeyState::InProgress,
        _ => KeyState::Indeterminate,
    }
}

/// A key's row as a claim finds it.
pub(super) struct KeyRow {
    pub request_hash: String,
    pub state: String,
    pub tool_call_id: String,
    pub lease_until_ms: u64,
    pub result: Option<String>,
    pub expires_at_ms: u64,
}

/// A key's row, from a row of [`KEY_ROW_COLUMNS`].
pub(super) fn key_row<R: Columns>(row: &R) -> Result<KeyRow, R::Error> {
    Ok(KeyRow {
        request_hash: row.text(0)?,
        state: row.text(1)?,
        tool_call_id: row.text(2)?,
        lease_until_ms: from_db(row.int(3)?),
        result: row.text_or_null(4)?,
        expires_at_ms: from_db(row.int(5)?),
    })
}

/// The columns of a `connections` row, in the order [`connection`] reads them (and both
/// backends write them).
pub(super) const CONNECTION_COLUMNS: &str = "tenant, principal, provider, resource, sealed, \
     token_hash, scope, expires_at, created_at, updated_at";

/// A connection, from a row of [`CONNECTION_COLUMNS`].
pub(super) fn connection<R: Columns>(row: &R) -> Result<Connection, R::Error> {
    Ok(Connection {
        key: ConnectionKey {
            tenant: row.text(0)?,
            principal: row.text(1)?,
            provider: row.text(2)?,
        },
        resource: row.text(3)?,
        sealed: row.text(4)?,
        token_hash: row.text(5)?,
        scope: row.text(6)?,
        expires_at_ms: row.int_or_null(7)?.map(from_db),
        created_at_ms: from_db(row.int(8)?),
        updated_at_ms: from_db(row.int(9)?),
    })
}

/// The columns of an `authorizations` row, in the order [`authorization`] reads them (and
/// both backends write them).
pub(super) const AUTHORIZATION_COLUMNS: &str = "state_hash, tenant, principal, provider, resource, \
     sealed_verifier, tool, browser_hash, created_at, expires_at, call";

/// A flow under way, from a row of [`AUTHORIZATION_COLUMNS`].
pub(super) fn authorization<R: Columns>(row: &R) -> Result<Authorization, R::Error> {
    Ok(Authorization {
        state_hash: row.text(0)?,
        key: ConnectionKey {
            tenant: row.text(1)?,
            principal: row.text(2)?,
            provider: row.text(3)?,
        },
        resource: row.text(4)?,
        sealed_verifier: row.text(5)?,
        tool: row.text(6)?,
        browser_hash: row.text_or_null(7)?,
        created_at_ms: from_db(row.int(8)?),
        expires_at_ms: from_db(row.int(9)?),
        call: row.text(10)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of plain values, as a backend would hand them over.
    struct Plain(Vec<Option<&'static str>>);

    impl Columns for Plain {
        type Error = Corrupt;

        fn text(&self, column: usize) -> Result<String, Corrupt> {
            self.text_or_null(column)?.ok_or(Corrupt {
                column,
                problem: "is NULL".to_owned(),
            })
        }

        fn text_or_null(&self, column: usize) -> Result<Option<String>, Corrupt> {
            Ok(self.0[column].map(str::to_owned))
        }

        fn int(&self, column: usize) -> Result<i64, Corrupt> {
            self.text(column)?.parse().map_err(|_| Corrupt {
                column,
                problem: "is not an integer".to_owned(),
            })
        }

        fn int_or_null(&self, column: usize) -> Result<Option<i64>, Corrupt> {
            match self.0[column] {
                None => Ok(None),
                Some(_) => self.int(column).map(Some),
            }
        }
    }

    fn approval_row(status: &'static str, call: &'static str) -> Plain {
        approval_row_waiting(status, call, [None; 4])
    }

    /// An approval row with its last four columns: `decided_as` and the three of `waiting`.
    fn approval_row_waiting(
        status: &'static str,
        call: &'static str,
        last: [Option<&'static str>; 4],
    ) -> Plain {
        let mut row = approval_columns(status, call);
        row.extend(last);
        Plain(row)
    }

    fn approval_columns(status: &'static str, call: &'static str) -> Vec<Option<&'static str>> {
        vec![
            Some("apr_1"),
            Some("acme"),
            Some("gatehouse.notes.send"),
            Some("k-1"),
            Some("sha256:00"),
            Some(call),
            Some(r#"["usr_1"]"#),
            Some("network"),
            Some(r#"["needs review"]"#),
            Some(status),
            Some("1000"),
            Some("2000"),
            None,
            None,
            None,
            None,
        ]
    }

    fn task_row(status: &'static str, result: Option<&'static str>) -> Plain {
        Plain(vec![
            Some("task_1"),
            Some("acme"),
            Some("usr_1"),
            Some("notes.send"),
            Some("apr_1"),
            Some(r#"{"args":{}}"#),
            Some(status),
            None,
            result,
            Some("1000"),
            Some("1500"),
            Some("2000"),
        ])
    }

    #[test]
    fn an_approval_row_reads_whole() {
        let approval = approval(&approval_row("pending", r#"{"args":{}}"#)).unwrap();
        assert_eq!(approval.id, "apr_1");
        assert_eq!(approval.status, ApprovalStatus::Pending);
        assert_eq!(approval.principals, ["usr_1"]);
        assert_eq!(approval.reasons, ["needs review"]);
        assert_eq!(
            (approval.created_at_ms, approval.expires_at_ms),
            (1000, 2000)
        );
        assert_eq!(approval.decided_at_ms, None);
        assert_eq!(approval.decided_as, None);
        // A row from before approvals kept how their callers wait: they retry.
        assert_eq!(approval.waiting, Waiting::Retry);
    }

    #[test]
    fn an_approval_row_reads_who_decided_and_how_its_caller_waits() {
        let read = |last| approval(&approval_row_waiting("approved", "{}", last));
        let held = read([Some("consent"), Some("held"), Some("5000"), None]).unwrap();
        assert_eq!(held.decided_as, Some(DecidedAs::Consent));
        assert_eq!(held.waiting, Waiting::Held { until_ms: 5000 });
        let task = read([Some("caller"), Some("task"), None, Some("task_1")]).unwrap();
        assert_eq!(task.decided_as, Some(DecidedAs::Caller));
        assert_eq!(
            task.waiting,
            Waiting::Task {
                id: "task_1".to_owned()
            }
        );
        let retry = read([Some("approver"), Some("retry"), None, None]).unwrap();
        assert_eq!(
            (retry.decided_as, &retry.waiting),
            (Some(DecidedAs::Approver), &Waiting::Retry)
        );
        // Each way of waiting is written to the columns it is read from.
        assert_eq!(waiting_columns(&retry.waiting), ("retry", None, None));
        assert_eq!(waiting_columns(&held.waiting), ("held", Some(5000), None));
        assert_eq!(
            waiting_columns(&task.waiting),
            ("task", None, Some("task_1"))
        );
    }

    #[test]
    fn a_damaged_decider_or_waiting_column_is_an_error_naming_it() {
        let read = |last| approval(&approval_row_waiting("approved", "{}", last)).unwrap_err();
        let decided_as = read([Some("boss"), None, None, None]);
        assert_eq!(decided_as.column, 16);
        assert!(decided_as.problem.contains("`boss`"), "{decided_as}");
        let on = read([None, Some("forever"), None, None]);
        assert_eq!(on.column, 17);
        assert!(on.problem.contains("`forever`"), "{on}");
        let until = read([None, Some("held"), None, None]);
        assert_eq!(until.column, 18);
        assert!(until.problem.contains("NULL"), "{until}");
        let task = read([None, Some("task"), None, None]);
        assert_eq!(task.column, 19);
    }

    #[test]
    fn a_task_row_reads_whole_and_a_damaged_one_names_its_column() {
        let working = task(&task_row("working", None)).unwrap();
        assert_eq!(working.id, "task_1");
        assert_eq!(working.status, TaskStatus::Working);
        assert_eq!(working.approval_id.as_deref(), Some("apr_1"));
        assert_eq!(working.call, serde_json::json!({ "args": {} }));
        assert_eq!(working.result, None);
        assert_eq!(
            (
                working.created_at_ms,
                working.updated_at_ms,
                working.expires_at_ms
            ),
            (1000, 1500, 2000)
        );
        let done = task(&task_row("completed", Some(r#"{"ok":true}"#))).unwrap();
        assert_eq!(done.result, Some(serde_json::json!({ "ok": true })));
        assert_eq!(task_json(&done).1.as_deref(), Some(r#"{"ok":true}"#));

        let status = task(&task_row("paused", None)).unwrap_err();
        assert_eq!(status.column, 6);
        assert!(status.problem.contains("`paused`"), "{status}");
        let result = task(&task_row("completed", Some("{cut"))).unwrap_err();
        assert_eq!(result.column, 8);
        assert!(result.problem.starts_with("is not JSON"), "{result}");
    }

    #[test]
    fn a_damaged_approval_row_is_an_error_naming_its_column() {
        let status = approval(&approval_row("maybe", "{}")).unwrap_err();
        assert_eq!(status.column, 9);
        assert!(status.problem.contains("`maybe`"), "{status}");
        let call = approval(&approval_row("pending", "{not json")).unwrap_err();
        assert_eq!(call.column, 5);
        assert!(
            call.to_string()
                .starts_with("the store holds a damaged row: column 5 is not JSON"),
            "{call}"
        );
    }
}
