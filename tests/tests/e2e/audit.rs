//! An audit trail that holds against someone who can write the database, and state that
//! survives a restart: a head recorded earlier still verifies after more calls and catches a
//! rewritten log; a gateway signs checkpoints of its chain with the operator's key and pushes
//! them to a file and an HTTP sink, and `audit verify --checkpoints` catches an edit, a
//! truncation, a rewritten-and-re-chained log and a forged checkpoint, naming the checkpoint
//! and the entry; a replay spends no fuel of its own; a second gateway on one SQLite file is
//! refused at start, naming PostgreSQL. (A plugin pushed through the admin API surviving a
//! restart is in admin.rs, beside the admin API's other tests.)

use std::path::{Path, PathBuf};
use std::time::Duration;

use gatehouse_host::state::AuditQuery;
use gatehouse_host::state::audit::{AuditEntry, GENESIS};
use gatehouse_tests::artifacts::ECHO;
use gatehouse_tests::cli::gatehouse_async;
use gatehouse_tests::gateway::{Serve, rest_and_echo, write_rest_config};
use gatehouse_tests::host::rest_config;
use gatehouse_tests::mcp::{outcome_of, try_call};
use gatehouse_tests::state::{config_file, five_records, host, post, store_at, tamper, transfer};
use gatehouse_tests::upstream::Upstream;
use gatehouse_tests::{config, free_port};
use serde_json::{Value, json};

/// The head `gatehouse audit verify` printed (`SEQ:HASH`).
fn printed_head(out: &str) -> String {
    out.split("head ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no head in {out}"))
        .to_owned()
}

/// `gatehouse audit verify --config CONFIG` with `more` arguments.
async fn verify(config: &Path, more: &[&str]) -> (u8, String) {
    let mut args = vec!["audit", "verify", "--config", config.to_str().unwrap()];
    args.extend_from_slice(more);
    gatehouse_async(&args).await
}

/// Every audit entry of a store file, in order.
async fn entries(store: &Path) -> Vec<AuditEntry> {
    gatehouse_host::state::open(&store_at(store))
        .unwrap()
        .audit(AuditQuery::default())
        .await
        .unwrap()
}

/// What someone who can write the database but lacks the key does to hide an edit: runs
/// `edit`, then recomputes every hash from entry `from` on, so the chain alone verifies.
async fn rechain(store: &Path, from: u64, edit: &str) {
    tamper(store, edit);
    let conn = rusqlite::Connection::open(store).unwrap();
    let mut prev = GENESIS.to_owned();
    for mut entry in entries(store).await {
        if entry.seq >= from {
            entry.prev_hash = prev;
            entry.hash = entry.expected_hash();
            conn.execute(
                "UPDATE audit SET prev_hash = ?1, hash = ?2 WHERE seq = ?3",
                rusqlite::params![entry.prev_hash, entry.hash, entry.seq as i64],
            )
            .unwrap();
        }
        prev = entry.hash;
    }
}

/// A copy of a store file for one tampering, made by SQLite (`VACUUM INTO`): one consistent
/// file whatever its WAL holds. Copying the file and then its WAL raced SQLite deleting the WAL
/// when the last connection to the store closed. `seq` is the audit table's rowid, so the copy
/// keeps every entry's.
fn copy_store(store: &Path, name: &str) -> PathBuf {
    let copy = store.with_file_name(format!("{name}.db"));
    let conn = rusqlite::Connection::open(store).unwrap();
    conn.execute("VACUUM INTO ?1", [copy.to_str().unwrap()])
        .unwrap();
    copy
}

#[tokio::test]
async fn a_head_recorded_earlier_holds_after_more_calls_and_catches_a_rewritten_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = five_records().await;
    let file = config_file(dir.path(), &store, "");
    let (code, out) = verify(&file, &[]).await;
    assert_eq!(code, 0, "{out}");
    let head = printed_head(&out);
    assert!(head.starts_with("5:sha256:"), "{out}");
    let bare = head.trim_start_matches("5:").to_owned();

    // The gateway goes on recording calls.
    {
        let mut more = config(&["gatehouse.*", "test.*"], &[]);
        more.store = store_at(&store);
        let host = host(more);
        for n in 0..2 {
            let result = host.call(transfer(&format!("later-{n}"), n)).await;
            assert!(result.is_ok(), "{result:#?}");
        }
    }
    for recorded in [&head, &bare] {
        let (code, out) = verify(&file, &["--head", recorded]).await;
        assert_eq!(code, 0, "{recorded}: {out}");
        assert!(out.contains("ok, 7 entries; head 7:sha256:"), "{out}");
    }

    // Rewriting entry 3 and chaining the rest again fools the chain, not the head.
    rechain(
        &store,
        3,
        "UPDATE audit SET outcome = 'POLICY_BLOCKED' WHERE seq = 3",
    )
    .await;
    let (code, out) = verify(&file, &[]).await;
    assert_eq!(
        code, 0,
        "the chain alone cannot see a re-chained log: {out}"
    );
    let now = entries(&store).await[4].hash.clone();
    let (code, out) = verify(&file, &["--head", &head]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.ends_with(&format!(
            "7 entries chain correctly, but not through the head you recorded ({bare}): entry 5's hash is {now} where {bare} was recorded: the log was rewritten up to entry 5 and chained again\n"
        )),
        "{out}"
    );
    let (code, out) = verify(&file, &["--head", &bare]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.ends_with(&format!(
            "no entry has the hash {bare}: the log was rewritten (or the head is from another log)\n"
        )),
        "{out}"
    );

    // Entries removed from the end.
    tamper(&store, "DELETE FROM audit WHERE seq > 4");
    let (code, out) = verify(&file, &["--head", &head]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.ends_with(
            "the log ends at entry 4, before entry 5: entries were removed from the end\n"
        ),
        "{out}"
    );

    let (code, out) = verify(&file, &["--head", "5:sha256:abc"]).await;
    assert_eq!(code, 2, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_checkpoints_catch_an_edit_a_truncation_a_re_chained_log_and_a_forgery() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let (code, out) = gatehouse_async(&[
        "keygen",
        "--key-id",
        "audit-test",
        "--out-dir",
        keys.to_str().unwrap(),
    ])
    .await;
    assert_eq!(code, 0, "{out}");
    let (secret, public) = (
        keys.join("audit-test.secret.toml"),
        keys.join("audit-test.pub.toml"),
    );
    let sink = dir.path().join("checkpoints.jsonl");

    // A gateway signing only at shutdown (the thresholds are out of reach).
    let config = dir.path().join("gatehouse.toml");
    write_rest_config(&config, &upstream, "gatehouse.*", "");
    let mut doc: toml::Table = std::fs::read_to_string(&config).unwrap().parse().unwrap();
    let store = PathBuf::from(doc["store"]["path"].as_str().unwrap());
    let mut checkpoints = toml::Table::new();
    checkpoints.insert("key".to_owned(), secret.display().to_string().into());
    checkpoints.insert("file".to_owned(), sink.display().to_string().into());
    checkpoints.insert("url".to_owned(), upstream.url("/checkpoints").into());
    checkpoints.insert("every_entries".to_owned(), 100_000.into());
    checkpoints.insert("every_seconds".to_owned(), 100_000.into());
    doc["store"]
        .as_table_mut()
        .unwrap()
        .insert("checkpoints".to_owned(), checkpoints.into());
    std::fs::write(&config, doc.to_string()).unwrap();
    let mut gateway = rest_and_echo(dir.path(), &config).start().await;
    for n in 0..5 {
        let result = try_call(
            gateway.port(),
            "gatehouse.echo.echo",
            json!({ "message": format!("m{n}") }),
            &format!("echo-{n}"),
        )
        .await
        .unwrap();
        assert_eq!(outcome_of(&result), "OK", "{result}");
    }
    gateway.signal("TERM");
    assert!(gateway.exit_status(Duration::from_secs(30)).await.success());

    // One checkpoint, at shutdown, of the fifth entry: written to the sink and the store.
    let lines = std::fs::read_to_string(&sink).unwrap();
    let signed: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(signed.len(), 1, "{lines}");
    let checkpoint = &signed[0];
    assert_eq!(
        (&checkpoint["seq"], &checkpoint["key_id"]),
        (&json!(5), &json!("audit-test"))
    );
    assert_eq!(checkpoint["hash"], json!(entries(&store).await[4].hash));
    let posted: Vec<Value> = upstream
        .seen()
        .iter()
        .filter(|seen| seen.path == "/checkpoints")
        .map(|seen| {
            assert_eq!(seen.method, "POST");
            serde_json::from_slice(&seen.body).unwrap()
        })
        .collect();
    assert_eq!(posted, signed, "the HTTP sink got the same checkpoint");
    let name = format!(
        "checkpoint 1 (entry 5, signed at {} ms by `audit-test`)",
        checkpoint["at_ms"]
    );
    let file = config_file(dir.path(), &store, "");
    let (code, exported) =
        gatehouse_async(&["audit", "checkpoints", "--config", file.to_str().unwrap()]).await;
    assert_eq!((code, exported.as_str()), (0, lines.as_str()));

    let with = [
        "--checkpoints",
        sink.to_str().unwrap(),
        "--public-key",
        public.to_str().unwrap(),
    ];
    let (code, out) = verify(&file, &with).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.ends_with("it extends all 1 signed checkpoints (the last at entry 5)\n"),
        "{out}"
    );

    // An edit: the chain breaks, inside the checkpoint.
    let edited = copy_store(&store, "edited");
    tamper(
        &edited,
        "UPDATE audit SET outcome = 'POLICY_BLOCKED' WHERE seq = 3",
    );
    let (code, out) = verify(&config_file(dir.path(), &edited, ""), &with).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.ends_with(&format!(
            "BROKEN after 2 good entries: entry 3 does not match its hash: it was edited; {name} covers it\n"
        )),
        "{out}"
    );

    // The same edit, re-chained: the chain verifies, the checkpoint does not.
    let rechained = copy_store(&store, "rechained");
    rechain(
        &rechained,
        3,
        "UPDATE audit SET outcome = 'POLICY_BLOCKED' WHERE seq = 3",
    )
    .await;
    let rechained_config = config_file(dir.path(), &rechained, "");
    let (code, out) = verify(&rechained_config, &[]).await;
    assert_eq!(code, 0, "the chain alone cannot see it: {out}");
    let (code, out) = verify(&rechained_config, &with).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.ends_with(&format!(
            "5 entries chain correctly, but {name}: entry 5's hash is {} where {} was recorded: the log was rewritten up to entry 5 and chained again\n",
            entries(&rechained).await[4].hash,
            checkpoint["hash"].as_str().unwrap()
        )),
        "{out}"
    );

    // ... and a checkpoint rewritten to match it has no valid signature.
    let forged = dir.path().join("forged.jsonl");
    let mut forgery = checkpoint.clone();
    forgery["hash"] = json!(entries(&rechained).await[4].hash);
    std::fs::write(&forged, format!("{forgery}\n")).unwrap();
    let (code, out) = verify(
        &rechained_config,
        &[
            "--checkpoints",
            forged.to_str().unwrap(),
            "--public-key",
            public.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.ends_with(&format!(
            "{name}: its signature does not verify with key `audit-test`: the checkpoint was forged or altered (or signed by another key)\n"
        )),
        "{out}"
    );

    // A truncation.
    let truncated = copy_store(&store, "truncated");
    tamper(&truncated, "DELETE FROM audit WHERE seq > 3");
    let (code, out) = verify(&config_file(dir.path(), &truncated, ""), &with).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.ends_with(&format!(
            "3 entries chain correctly, but {name}: the log ends at entry 3, before entry 5: entries were removed from the end\n"
        )),
        "{out}"
    );

    // Entries appended after the last checkpoint are fine, and said to rest on the chain.
    {
        let mut more = rest_config(&upstream);
        more.store = store_at(&store);
        let host = host(more);
        let result = host
            .call(post(&upstream, "/api/after", &json!({}), "after-1"))
            .await;
        assert!(result.is_ok(), "{result:#?}");
    }
    let (code, out) = verify(&file, &with).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.ends_with("it extends all 1 signed checkpoints (the last at entry 5; entries 6 to 6 are protected by the chain alone until the next one)\n"),
        "{out}"
    );
}

#[tokio::test]
async fn a_replay_spends_no_fuel_of_its_own() {
    let upstream = Upstream::start().await;
    let host = host(rest_config(&upstream));
    let first = host
        .call(post(&upstream, "/api/a", &json!({ "x": 1 }), "fuel-1"))
        .await;
    assert!(first.is_ok(), "{first:#?}");
    assert!(
        first.usage.as_ref().is_some_and(|u| u.fuel_consumed > 0),
        "{first:#?}"
    );
    let again = host
        .call(post(&upstream, "/api/a", &json!({ "x": 1 }), "fuel-1"))
        .await;
    assert_eq!(
        again.replay_of.as_deref(),
        Some(first.tool_call_id.as_str())
    );
    assert_eq!(again.usage, None, "{again:#?}");
    // A read-only call's entry is written just after its answer.
    let recorded = gatehouse_tests::audit_entries(&host, &again.tool_call_id).await;
    assert_eq!(recorded.len(), 1, "{recorded:#?}");
    let record = recorded[0].expanded()["record"].take();
    assert_eq!(record["result"]["replay_of"], json!(first.tool_call_id));
    assert_eq!(record["result"].get("usage"), None, "{record:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_gateway_on_one_sqlite_file_is_refused_naming_postgresql() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gatehouse.toml");
    write_rest_config(&config, &upstream, "gatehouse.*", "");
    let doc: toml::Table = std::fs::read_to_string(&config).unwrap().parse().unwrap();
    let store = doc["store"]["path"].as_str().unwrap().to_owned();
    let echo = dir.path().join("echo.wasm");
    std::fs::write(&echo, ECHO.signed()).unwrap();
    let serve = Serve::config(&config).adapter(&echo);
    let _first = serve.clone().listen(free_port()).start().await;

    // It must exit by itself; one that serves is killed so the test fails instead of hanging.
    let second = serve.listen(free_port());
    let (code, stderr) = tokio::task::spawn_blocking(move || second.exit(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "error: cannot open the state store {store}: another gateway is serving from it (it holds {store}.lock). One SQLite file serves one gateway process"
        )) && stderr.contains(
            "or let several gateways share a PostgreSQL database (`[store] url`)"
        ),
        "{stderr}"
    );
}

/// `[receipts]` (issue 58): every result carries a receipt signed with the gateway's key. It
/// verifies offline against the public key and an audit export (`gatehouse receipt verify`);
/// a receipt with one byte changed fails, and so does an export that lacks the action or holds
/// another entry in its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_proves_offline_what_the_gateway_did_and_a_changed_byte_or_a_missing_entry_fails()
{
    use gatehouse_host::plugin::signature::SigningKey;
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let key = SigningKey::generate("gateway-1").unwrap();
    let secret = write("gateway-1.secret.toml", &key.to_toml());
    let public = write("gateway-1.pub.toml", &key.public_key().to_toml());
    let mut config = rest_config(&upstream);
    config.receipts.key = Some(secret);
    let store = config.store.path.clone().unwrap();
    let gateway = host(config);

    let read = gatehouse_tests::echo(&gateway, "hi").await;
    let receipt = read.receipt.clone().expect("a read-only call's receipt");
    assert!(receipt.verifies(&key.public_key()));
    assert_eq!(
        (
            receipt.tool.as_str(),
            receipt.outcome.as_str(),
            receipt.decision.as_str()
        ),
        ("gatehouse.echo.echo", "OK", "allow")
    );
    // The result digest is of what the caller got.
    let json = |v: Result<Value, serde_json::Error>| v.unwrap();
    assert_eq!(
        receipt.result,
        gatehouse_core::receipt::result_digest(
            &json(serde_json::to_value(read.status)),
            &json(serde_json::to_value(&read.content)),
            &json(serde_json::to_value(&read.structured_content)),
            &json(serde_json::to_value(&read.error)),
        )
    );
    let written = gateway
        .call(post(
            &upstream,
            "/orders",
            &json!({ "sku": "A1" }),
            "receipt-1",
        ))
        .await;
    assert!(written.is_ok(), "{written:#?}");
    let receipt = written.receipt.clone().expect("a write's receipt");
    // The entry the receipt names is the call's.
    let entries = entries(&store).await;
    let entry = entries.iter().find(|e| e.seq == receipt.seq).unwrap();
    assert_eq!(
        entry.event.tool_call_id.as_deref(),
        Some(written.tool_call_id.as_str())
    );
    assert_eq!(entry.hash, receipt.hash);

    // Offline: the receipt, the public key and an export.
    let receipt_file = write("receipt.json", &serde_json::to_string(&written).unwrap());
    let ops = config_file(dir.path(), &store, "");
    let export = dir.path().join("export.jsonl");
    let (code, out) = gatehouse_async(&[
        "audit",
        "export",
        "--config",
        ops.to_str().unwrap(),
        "--output",
        export.to_str().unwrap(),
    ])
    .await;
    assert_eq!(code, 0, "{out}");
    let check = |receipt: PathBuf, export: PathBuf| {
        let public = public.clone();
        async move {
            gatehouse_async(&[
                "receipt",
                "verify",
                receipt.to_str().unwrap(),
                "--key",
                public.to_str().unwrap(),
                "--audit",
                export.to_str().unwrap(),
            ])
            .await
        }
    };
    let (code, out) = check(receipt_file.clone(), export.clone()).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("signed by `gateway-1`"), "{out}");
    assert!(
        out.contains(&format!("holds entry {}", receipt.seq)) && out.contains("the same request"),
        "{out}"
    );

    // One byte changed: the outcome it claims.
    let forged = serde_json::to_string(&receipt)
        .unwrap()
        .replace("\"outcome\":\"OK\"", "\"outcome\":\"OJ\"");
    assert_ne!(forged, serde_json::to_string(&receipt).unwrap());
    let (code, out) = check(write("forged.json", &forged), export.clone()).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("does not verify"), "{out}");

    // An export without the action, and one holding another entry at its place.
    let text = std::fs::read_to_string(&export).unwrap();
    let (without, swapped): (Vec<&str>, Vec<String>) = (
        text.lines()
            .filter(|line| !line.contains(&written.tool_call_id))
            .collect(),
        text.lines()
            .map(|line| line.replace(&written.tool_call_id, &read.tool_call_id))
            .collect(),
    );
    let (code, out) = check(
        receipt_file.clone(),
        write("without.jsonl", &without.join("\n")),
    )
    .await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("holds no entry {}", receipt.seq)),
        "{out}"
    );
    let (code, out) = check(receipt_file, write("swapped.jsonl", &swapped.join("\n"))).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("tool_call_id"), "{out}");
}
