//! Hot swap of a policy module under concurrent calls: no call fails because of the swap,
//! every decision names the version that made it, a module that fails to load or whose
//! config check fails never replaces the serving one, and rollback restores the previous one.
//! A downgrade is refused unless forced, also after a restart, against the version the store
//! records as last served.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gatehouse_host::config::PolicyDefault;
use gatehouse_host::watch::PolicyWatcher;
use gatehouse_host::{Host, OutcomeCode, Status};
use gatehouse_tests::artifacts::{ECHO, POLICY_PROBE};
use gatehouse_tests::bind;
use gatehouse_tests::host::HostBuilder;
use serde_json::json;

fn host() -> Host {
    host_on(gatehouse_tests::store_path())
}

/// [`host`], its state in the store file `store`.
fn host_on(store: std::path::PathBuf) -> Host {
    HostBuilder::trusting(&["gatehouse.*"], &["test.*"])
        .with(|config| {
            config.store.path = Some(store);
            config.pipeline.policy_default = PolicyDefault::Deny;
            config.pipeline.policies = vec![bind(
                "test.policy-probe",
                "*",
                0,
                json!({ "verdict": "allow" }),
            )];
        })
        .adapters(&[ECHO])
        .build()
}

async fn decided_by(host: &Host) -> String {
    let result = gatehouse_tests::echo(host, "m").await;
    assert_eq!(
        (result.status, result.outcome),
        (Status::Ok, OutcomeCode::Ok),
        "{result:#?}"
    );
    let decision = result.policy_decision.expect("a decision is recorded");
    let module = decision.modules[0].module.clone().expect("module named");
    assert_eq!(module.id, "test.policy-probe");
    assert!(module.digest.starts_with("sha256:"));
    module.version
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapping_under_concurrent_calls_fails_no_call() {
    let host = Arc::new(host());
    let v1 = POLICY_PROBE.signed_as_version("1.0.0");
    let v2 = POLICY_PROBE.signed_as_version("2.0.0");
    host.install_policy(&v1).expect("v1 installs");
    assert_eq!(decided_by(&host).await, "1.0.0");

    let done = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let host = Arc::clone(&host);
            let done = Arc::clone(&done);
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while !done.load(Ordering::Relaxed) || seen.len() < 10 {
                    seen.push(decided_by(&host).await);
                    // A call that never waits never returns to the scheduler; yield so other
                    // tasks (and the timer) get their turn.
                    tokio::task::yield_now().await;
                }
                seen
            })
        })
        .collect();
    let mut tampered = v2.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0xff;
    for round in 0..10 {
        let next = if round % 2 == 0 { &v2 } else { &v1 };
        // Every other swap goes back to v1: the operator forces that downgrade.
        host.force_install_policy(next).expect("swap installs");
        // A tampered build never replaces the serving version.
        let serving = host.policy_version("test.policy-probe").unwrap();
        host.install_policy(&tampered)
            .expect_err("tampered bytes are refused");
        assert_eq!(host.policy_version("test.policy-probe").unwrap(), serving);
        // Let calls run on this version before the next swap. This thread is not a runtime
        // worker, so blocking it does not hold up the calls.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    done.store(true, Ordering::Relaxed);
    let mut versions = std::collections::BTreeMap::new();
    for worker in workers {
        for version in worker.await.expect("no worker panicked") {
            *versions.entry(version).or_insert(0) += 1;
        }
    }
    // Every call succeeded (checked in `decided_by`), each decided by a version that was
    // serving, and calls ran on both sides of the swaps.
    assert_eq!(
        versions.keys().map(String::as_str).collect::<Vec<_>>(),
        ["1.0.0", "2.0.0"],
        "{versions:?}"
    );
    // The last swap installed v1 (round 9); new calls see it.
    assert_eq!(decided_by(&host).await, "1.0.0");
}

#[tokio::test]
async fn rollback_restores_the_previous_version_and_bad_config_never_swaps() {
    let host = host();
    host.install_policy(&POLICY_PROBE.signed_as_version("1.0.0"))
        .unwrap();
    host.install_policy(&POLICY_PROBE.signed_as_version("2.0.0"))
        .unwrap();
    assert_eq!(decided_by(&host).await, "2.0.0");
    let back = host.rollback_policy("test.policy-probe").unwrap();
    assert_eq!(back.version, "1.0.0");
    assert_eq!(decided_by(&host).await, "1.0.0");

    // A config that breaks the module's config schema is refused; the old config keeps serving.
    let err = host
        .set_policy_config("test.policy-probe", &json!({ "verdict": "maybe" }))
        .unwrap_err();
    assert!(err.to_string().contains("config_schema"), "{err}");
    assert_eq!(decided_by(&host).await, "1.0.0");
    // A valid config swap takes effect for new calls.
    host.set_policy_config("test.policy-probe", &json!({ "verdict": "deny" }))
        .unwrap();
    let result = gatehouse_tests::echo(&host, "m").await;
    assert_eq!(
        (result.status, result.outcome),
        (Status::Rejected, OutcomeCode::PolicyBlocked)
    );
}

#[tokio::test]
async fn a_watched_directory_swaps_in_new_versions_and_ignores_bad_files() {
    let host = Arc::new(host());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("probe.wasm");
    std::fs::write(&file, POLICY_PROBE.signed_as_version("1.0.0")).unwrap();
    let mut watcher = PolicyWatcher::start(
        Arc::clone(&host),
        dir.path().to_owned(),
        std::time::Duration::from_millis(20),
    );
    let event = watcher.next_event().await.unwrap();
    assert_eq!(event.result.unwrap().version, "1.0.0");
    assert_eq!(decided_by(&host).await, "1.0.0");

    std::fs::write(&file, POLICY_PROBE.signed_as_version("2.0.0")).unwrap();
    let event = watcher.next_event().await.unwrap();
    assert_eq!(
        (event.path, event.result.unwrap().version),
        (file.clone(), "2.0.0".to_owned())
    );
    assert_eq!(decided_by(&host).await, "2.0.0");

    // A file that does not verify never replaces the serving version.
    std::fs::write(dir.path().join("broken.wasm"), b"not a component").unwrap();
    let event = watcher.next_event().await.unwrap();
    assert!(event.result.is_err(), "{event:?}");
    assert_eq!(decided_by(&host).await, "2.0.0");
}

// Issue 9, item 8: a downgrade is refused unless the operator forces it.

#[tokio::test]
async fn a_downgrade_is_refused_unless_forced_also_through_the_watched_directory() {
    let host = Arc::new(host());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("probe.wasm");
    std::fs::write(&file, POLICY_PROBE.signed_as_version("2.0.0")).unwrap();
    let mut watcher = PolicyWatcher::start(
        Arc::clone(&host),
        dir.path().to_owned(),
        std::time::Duration::from_millis(20),
    );
    assert_eq!(
        watcher.next_event().await.unwrap().result.unwrap().version,
        "2.0.0"
    );
    // An attacker who can write to the directory drops in an older, validly signed build.
    std::fs::write(&file, POLICY_PROBE.signed_as_version("1.0.0")).unwrap();
    let event = watcher.next_event().await.unwrap();
    let err = event.result.unwrap_err();
    assert!(
        err.contains("older than 2.0.0, the version serving"),
        "{err}"
    );
    assert_eq!(decided_by(&host).await, "2.0.0");
    // The library call refuses it too; forcing it is the operator's explicit choice.
    let err = host
        .install_policy(&POLICY_PROBE.signed_as_version("1.0.0"))
        .unwrap_err();
    assert!(
        matches!(err, gatehouse_host::InstallError::Downgrade { .. }),
        "{err}"
    );
    host.force_install_policy(&POLICY_PROBE.signed_as_version("1.0.0"))
        .unwrap();
    assert_eq!(decided_by(&host).await, "1.0.0");

    // Adapters the same way.
    let old_echo = ECHO.signed_as_version("0.0.1");
    let err = host.install_adapter(&old_echo).unwrap_err();
    assert!(
        matches!(err, gatehouse_host::InstallError::Downgrade { .. }),
        "{err}"
    );
    assert_eq!(
        host.force_install_adapter(&old_echo).unwrap().version,
        "0.0.1"
    );
}

/// A host restarted on the same store holds the version its watched directory installed
/// before, as the store recorded it: once the floor is held, an older, validly signed build
/// dropped into the directory is refused, although nothing serves under its id yet.
#[tokio::test]
async fn a_restarted_host_refuses_what_is_older_than_the_version_last_served() {
    let store = gatehouse_tests::store_path();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("probe.wasm");
    let watch = |host: &Arc<Host>| {
        let interval = std::time::Duration::from_millis(20);
        PolicyWatcher::start(Arc::clone(host), dir.path().to_owned(), interval)
    };
    let before = Arc::new(host_on(store.clone()));
    std::fs::write(&file, POLICY_PROBE.signed_as_version("2.0.0")).unwrap();
    let mut watcher = watch(&before);
    let installed = watcher.next_event().await.unwrap().result.unwrap();
    assert_eq!(installed.version, "2.0.0");
    // The watcher recorded it as served before it reported it.
    let served = before.store().served_versions().await.unwrap();
    assert_eq!(
        (served[0].kind.as_str(), served[0].version.as_str()),
        ("policy", "2.0.0")
    );
    drop(watcher);
    drop(before);

    // The restart: echo serves; the probe is not installed yet.
    let after = Arc::new(host_on(store));
    let allowed = after.hold_floor(&[], "test").await.unwrap();
    assert_eq!(allowed, Vec::<gatehouse_host::AllowedDowngrade>::new());
    let recorded: Vec<_> = (after.store().served_versions().await.unwrap().into_iter())
        .map(|s| (s.kind, s.plugin, s.version))
        .collect();
    let row =
        |kind: &str, id: &str, version: &str| (kind.to_owned(), id.to_owned(), version.to_owned());
    assert_eq!(
        recorded,
        [
            row("adapter", "gatehouse.echo", "0.1.0"),
            row("policy", "test.policy-probe", "2.0.0")
        ]
    );
    std::fs::write(&file, POLICY_PROBE.signed_as_version("1.0.0")).unwrap();
    let mut watcher = watch(&after);
    let err = watcher.next_event().await.unwrap().result.unwrap_err();
    assert!(
        err.contains(
            "`test.policy-probe` 1.0.0 is older than 2.0.0, the version serving or last served"
        ),
        "{err}"
    );
    assert_eq!(after.policy_version("test.policy-probe"), None);
    // The library's override still forces it; the same version, or a newer one, installs.
    let err = after
        .install_policy(&POLICY_PROBE.signed_as_version("1.0.0"))
        .unwrap_err();
    assert!(
        matches!(&err, gatehouse_host::InstallError::Downgrade { serving, .. } if serving == "2.0.0"),
        "{err}"
    );
    after
        .install_policy(&POLICY_PROBE.signed_as_version("2.0.0"))
        .unwrap();
    assert_eq!(decided_by(&after).await, "2.0.0");
    after
        .force_install_policy(&POLICY_PROBE.signed_as_version("1.0.0"))
        .unwrap();
    assert_eq!(decided_by(&after).await, "1.0.0");
}
