//! Signed plugins: each way a component can be untrustworthy is refused at load with an error
//! naming the cause, and the host keeps serving.

use gatehouse_host::LoadError;
use gatehouse_host::error::SignatureError;
use gatehouse_host::error::TrustError;
use gatehouse_host::plugin::inspect;
use gatehouse_host::plugin::manifest::PluginKind;
use gatehouse_host::plugin::sections::{self, MANIFEST_SECTION, SIGNATURE_SECTION};
use gatehouse_host::plugin::signature::{self, SigningKey};
use gatehouse_host::{Host, Status};
use gatehouse_tests::artifacts::{ECHO, TEXTKIT, WRONG_WORLD};
use gatehouse_tests::host::HostBuilder;
use gatehouse_tests::{config, publisher, trust};

/// A host trusting the test publisher's `gatehouse.*` and `test.*` adapters, nothing
/// installed.
fn host() -> Host {
    HostBuilder::trusting(&["gatehouse.*", "test.*"], &[]).build()
}

/// The refusal, and proof the host still loads and runs a good adapter afterwards.
async fn refused(host: &Host, bytes: &[u8]) -> LoadError {
    let err = host
        .load_adapter(bytes)
        .expect_err("the component must be refused");
    host.install_adapter(&ECHO.signed())
        .expect("a good adapter still loads");
    let result = gatehouse_tests::echo(host, "ok").await;
    assert_eq!(result.status, Status::Ok, "{result:#?}");
    err
}

#[tokio::test]
async fn a_correctly_signed_adapter_loads_and_runs() {
    let host = host();
    let adapter = host.load_adapter(&ECHO.signed()).unwrap();
    assert_eq!(adapter.plugin().id, "gatehouse.echo");
    assert_eq!(adapter.plugin().key_id, "test-publisher");
    assert!(adapter.plugin().digest.starts_with("sha256:"));
}

#[tokio::test]
async fn unsigned_is_refused() {
    let host = host();
    let mut bytes = ECHO.bytes();
    sections::append_custom(&mut bytes, MANIFEST_SECTION, &ECHO.manifest().to_json());
    let err = refused(&host, &bytes).await;
    assert!(
        matches!(err, LoadError::Signature(SignatureError::Unsigned)),
        "{err}"
    );
    assert!(err.to_string().contains("unsigned"), "{err}");
}

#[tokio::test]
async fn a_bare_component_without_manifest_or_signature_is_refused_as_unsigned() {
    let err = refused(&host(), &ECHO.bytes()).await;
    assert!(
        matches!(err, LoadError::Signature(SignatureError::Unsigned)),
        "{err}"
    );
}

#[tokio::test]
async fn unknown_key_is_refused() {
    let stranger = SigningKey::generate("stranger").unwrap();
    let err = refused(&host(), &ECHO.signed_by(&stranger)).await;
    assert!(
        matches!(&err, LoadError::Trust(TrustError::UnknownKey { key_id }) if key_id == "stranger"),
        "{err}"
    );
    assert!(err.to_string().contains("unknown key `stranger`"), "{err}");
}

#[tokio::test]
async fn a_signature_by_another_key_under_a_trusted_id_is_refused() {
    let impostor = SigningKey::generate(&publisher().key_id).unwrap();
    let err = refused(&host(), &ECHO.signed_by(&impostor)).await;
    assert!(
        matches!(&err, LoadError::Trust(TrustError::BadSignature { key_id }) if key_id == "test-publisher"),
        "{err}"
    );
}

#[tokio::test]
async fn a_corrupted_signature_is_refused() {
    let signed = ECHO.signed();
    let list = sections::sections(&signed).unwrap();
    let block = sections::custom(&list, SIGNATURE_SECTION)[0];
    let mut json: serde_json::Value = serde_json::from_slice(block).unwrap();
    let sig = json["signature"].as_str().unwrap();
    let first = if sig.starts_with('A') { "B" } else { "A" };
    let flipped = format!("{first}{}", &sig[1..]);
    json["signature"] = flipped.into();
    let mut bytes = sections::without(&signed, &list, &[SIGNATURE_SECTION]);
    sections::append_custom(
        &mut bytes,
        SIGNATURE_SECTION,
        &serde_json::to_vec(&json).unwrap(),
    );
    let err = refused(&host(), &bytes).await;
    assert!(
        matches!(err, LoadError::Trust(TrustError::BadSignature { .. })),
        "{err}"
    );
}

#[tokio::test]
async fn tampered_code_is_refused() {
    let mut bytes = ECHO.signed();
    // Flip one byte in the middle of the largest section: the code, not the section framing.
    let list = sections::sections(&bytes).unwrap();
    let code = list
        .iter()
        .max_by_key(|s| s.range.len())
        .unwrap()
        .range
        .clone();
    let at = code.start + code.len() / 2;
    bytes[at] ^= 0x01;
    let err = refused(&host(), &bytes).await;
    assert!(
        matches!(err, LoadError::Signature(SignatureError::Tampered { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("modified after signing"), "{err}");
}

#[tokio::test]
async fn a_tampered_manifest_is_refused() {
    let signed = ECHO.signed();
    let list = sections::sections(&signed).unwrap();
    let mut manifest = ECHO.manifest();
    if let gatehouse_host::plugin::manifest::Manifest::Adapter(m) = &mut manifest {
        m.capabilities[0].description = "now does something else".to_owned();
    }
    let mut bytes = sections::without(&signed, &list, &[MANIFEST_SECTION, SIGNATURE_SECTION]);
    sections::append_custom(&mut bytes, MANIFEST_SECTION, &manifest.to_json());
    bytes.extend_from_slice(&signed[list.last().unwrap().range.clone()]);
    let err = refused(&host(), &bytes).await;
    assert!(
        matches!(err, LoadError::Signature(SignatureError::Tampered { .. })),
        "{err}"
    );
}

#[tokio::test]
async fn a_key_publishing_outside_its_scope_is_refused() {
    let mut config = config(&["acme.*"], &["gatehouse.*"]);
    config.cache.enabled = false;
    let host = Host::new(config).unwrap();
    let err = host.load_adapter(&ECHO.signed()).unwrap_err();
    match &err {
        LoadError::Trust(TrustError::OutOfScope {
            key_id,
            kind,
            id,
            scope,
        }) => {
            assert_eq!(
                (key_id.as_str(), *kind, id.as_str()),
                ("test-publisher", PluginKind::Adapter, "gatehouse.echo")
            );
            assert_eq!(scope, &vec!["acme.*".to_owned()]);
        }
        other => panic!("expected OutOfScope, got {other}"),
    }
    // A policy scope does not cover adapters, and vice versa.
    assert!(
        err.to_string()
            .contains("may not publish adapter `gatehouse.echo`"),
        "{err}"
    );
}

#[tokio::test]
async fn an_invalid_manifest_is_refused_even_when_signed() {
    let mut bytes = ECHO.bytes();
    let json = br#"{"kind":"adapter","id":"gatehouse.echo","version":"not-semver","publisher":"x","capability":[]}"#;
    sections::append_custom(&mut bytes, MANIFEST_SECTION, json);
    let signed = signature::sign(publisher(), &bytes).unwrap();
    let err = refused(&host(), &signed).await;
    assert!(matches!(err, LoadError::Manifest(_)), "{err}");
    assert!(
        err.to_string().contains("manifest field `version`"),
        "{err}"
    );
}

#[tokio::test]
async fn a_signed_component_without_manifest_is_refused() {
    let signed = signature::sign(publisher(), &ECHO.bytes()).unwrap();
    let err = refused(&host(), &signed).await;
    assert!(matches!(err, LoadError::NoManifest), "{err}");
}

#[tokio::test]
async fn a_manifest_of_the_other_kind_is_refused() {
    let host = Host::new(config(&["gatehouse.*"], &["gatehouse.*"])).unwrap();
    let err = host.load_policy(&ECHO.signed()).unwrap_err();
    assert!(
        matches!(
            err,
            LoadError::WrongKind {
                expected: PluginKind::Policy,
                found: PluginKind::Adapter
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_component_not_implementing_its_world_is_refused() {
    let err = refused(&host(), &WRONG_WORLD.signed()).await;
    assert!(matches!(err, LoadError::World(_)), "{err}");
}

#[tokio::test]
async fn a_core_module_is_refused_as_not_a_component() {
    let core = b"\0asm\x01\x00\x00\x00".to_vec();
    let err = refused(&host(), &core).await;
    assert!(matches!(err, LoadError::Format(_)), "{err}");
    assert!(err.to_string().contains("wasm32-wasip2"), "{err}");
}

#[test]
fn a_second_trusted_key_is_independent() {
    let other = SigningKey::generate("other").unwrap();
    let mut config = config(&["gatehouse.echo"], &[]);
    config
        .trust
        .publishers
        .push(trust(&other, &["gatehouse.textkit"], &[]));
    let host = Host::new(config).unwrap();
    host.load_adapter(&ECHO.signed()).unwrap();
    host.load_adapter(&TEXTKIT.signed_by(&other)).unwrap();
    let err = host.load_adapter(&TEXTKIT.signed()).unwrap_err();
    assert!(
        matches!(err, LoadError::Trust(TrustError::OutOfScope { .. })),
        "{err}"
    );
}

#[test]
fn inspect_reads_without_trusting() {
    let report = inspect(&ECHO.signed()).unwrap();
    assert_eq!(report.manifest.unwrap().id(), "gatehouse.echo");
    assert_eq!(report.signature.unwrap().key_id, "test-publisher");
    let bare = inspect(&ECHO.bytes()).unwrap();
    assert!(bare.signature.is_none());
    assert!(
        bare.manifest_error
            .unwrap()
            .contains("no `gatehouse:manifest` section")
    );
}

#[test]
fn a_duplicate_trusted_key_id_is_a_config_error() {
    let mut config = config(&["gatehouse.*"], &[]);
    config.trust.publishers.push(trust(publisher(), &[], &[]));
    let err = Host::new(config).unwrap_err().to_string();
    assert!(err.contains("listed twice"), "{err}");
}

// Issue 9, item 8: strict ed25519.

/// The identity point: a small-order ("weak") ed25519 public key.
const WEAK_KEY: &str = "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
/// R = identity, S = 0: a lax verifier accepts it from the weak key for any message.
const FORGED_SIGNATURE: &str =
    "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==";

#[tokio::test]
async fn a_weak_publisher_key_is_refused_so_no_forged_signature_can_load() {
    // The attacker gets an operator to trust a "key" that is the identity point, and ships a
    // component whose signature block carries a signature nobody computed.
    let mut config = config(&["gatehouse.*"], &[]);
    config
        .trust
        .publishers
        .push(gatehouse_host::config::PublisherConfig {
            key_id: "weak".to_owned(),
            public_key: WEAK_KEY.to_owned(),
            adapters: vec![gatehouse_tests::glob("gatehouse.*")],
            policies: Vec::new(),
        });
    let signer = SigningKey::generate("weak").unwrap();
    let signed = ECHO.signed_by(&signer);
    let marker = b"\"signature\":\"";
    let start = signed
        .windows(marker.len())
        .rposition(|w| w == marker)
        .expect("a signature block")
        + marker.len();
    let mut forged = signed.clone();
    forged[start..start + FORGED_SIGNATURE.len()].copy_from_slice(FORGED_SIGNATURE.as_bytes());

    match Host::new(config) {
        Err(err) => {
            let text = err.to_string();
            assert!(text.contains("weak (small-order)"), "{text}");
        }
        Ok(host) => panic!(
            "a weak key was trusted; the forged component loads: {:?}",
            host.load_adapter(&forged).map(|a| a.plugin().clone())
        ),
    }
}
