//! The compile cache: a second start does not recompile, and a corrupted or foreign entry is
//! never executed.

use std::path::{Path, PathBuf};

use gatehouse_host::plugin::CacheOutcome;
use gatehouse_host::{Host, Status};
use gatehouse_tests::artifacts::ECHO;
use gatehouse_tests::host::HostBuilder;

fn host_with_cache(dir: &Path) -> Host {
    HostBuilder::trusting(&["gatehouse.*"], &[])
        .with(|config| {
            config.cache.enabled = true;
            config.cache.dir = Some(dir.to_owned());
        })
        .build()
}

async fn load_and_call(dir: &Path) -> CacheOutcome {
    let host = host_with_cache(dir);
    let echo = host.load_adapter(&ECHO.signed()).unwrap();
    let outcome = echo.cache().clone();
    host.serve_adapter(echo).unwrap();
    let result = gatehouse_tests::echo(&host, "x").await;
    assert_eq!(result.status, Status::Ok, "{result:#?}");
    outcome
}

fn entry(dir: &Path) -> PathBuf {
    let entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries[0].clone()
}

#[tokio::test]
async fn a_second_start_loads_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(load_and_call(dir.path()).await, CacheOutcome::Miss);
    assert_eq!(load_and_call(dir.path()).await, CacheOutcome::Hit);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join("cache.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the cache key is private to its owner");
    }
}

#[tokio::test]
async fn a_corrupted_entry_is_rejected_recompiled_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    load_and_call(dir.path()).await;
    let path = entry(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    match load_and_call(dir.path()).await {
        CacheOutcome::Rejected(reason) => {
            assert!(reason.contains("authentication tag"), "{reason}");
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert_eq!(
        load_and_call(dir.path()).await,
        CacheOutcome::Hit,
        "the entry was replaced"
    );
}

#[tokio::test]
async fn a_truncated_entry_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    load_and_call(dir.path()).await;
    std::fs::write(entry(dir.path()), b"short").unwrap();
    assert_eq!(
        load_and_call(dir.path()).await,
        CacheOutcome::Rejected("truncated entry".to_owned())
    );
}

#[tokio::test]
async fn an_entry_from_another_host_is_rejected() {
    let ours = tempfile::tempdir().unwrap();
    let theirs = tempfile::tempdir().unwrap();
    load_and_call(ours.path()).await;
    load_and_call(theirs.path()).await;
    // Same component, same engine, valid artifact, but written under another host's key.
    let name = entry(theirs.path()).file_name().unwrap().to_owned();
    std::fs::copy(entry(theirs.path()), ours.path().join(&name)).unwrap();
    assert!(matches!(
        load_and_call(ours.path()).await,
        CacheOutcome::Rejected(_)
    ));
}
