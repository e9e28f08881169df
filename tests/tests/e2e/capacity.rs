//! Instance slots: a host with `[sandbox] max_concurrent_calls = 1`, one call holding the
//! slot while it waits on a slow upstream (a host call, which the epoch deadline cannot cut
//! short), and a second call arriving meanwhile. The second waits for the slot and runs; if
//! the slot stays taken for its whole deadline, it fails as GATEWAY_BUSY without running.

use std::time::Duration;

use gatehouse_host::ErrorKind;
use gatehouse_host::{Host, OutcomeCode, Status, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_tests::artifacts::{ECHO, EGRESS_PROBE};
use gatehouse_tests::host::HostBuilder;
use gatehouse_tests::upstream::Upstream;
use serde_json::json;

/// One slot, `timeout_ms` per call, the probe granted GET on the upstream (10 s of egress
/// time, so only the sandbox deadline ends a slow request).
fn host(upstream: &Upstream, timeout_ms: u64) -> Host {
    HostBuilder::trusting(&["gatehouse.*", "test.*"], &[])
        .with(|config| {
            config.sandbox.max_concurrent_calls = 1;
            config.sandbox.timeout_ms = timeout_ms;
        })
        .egress(json!({
            "max_total_ms": 10_000,
            "grant": [{
                "allow_private": ["127.0.0.0/8"],
                "adapter": "test.egress-probe",
                "url": format!("http://127.0.0.1:{}/", upstream.port),
                "methods": ["GET"],
            }],
        }))
        .adapters(&[EGRESS_PROBE, ECHO])
        .build()
}

/// The probe GETs `/delay/<ms>/x`, holding its slot meanwhile.
async fn slow_call(host: &Host, upstream: &Upstream, ms: u64) -> ToolResultEnvelope {
    let url = upstream.url(&format!("/delay/{ms}/x"));
    host.call(ToolCallEnvelope::new(
        "default",
        "test.egress-probe.read",
        json!({ "requests": [{ "method": "GET", "url": url }] }),
    ))
    .await
}

/// An echo call sent once the slow call is under way.
async fn echo_meanwhile(host: &Host) -> ToolResultEnvelope {
    tokio::time::sleep(Duration::from_millis(50)).await;
    gatehouse_tests::echo(host, "queued").await
}

#[tokio::test]
async fn a_call_beyond_the_slot_limit_waits_for_a_free_slot() {
    let upstream = Upstream::start().await;
    let host = host(&upstream, 5_000);
    let (slow, echo) = tokio::join!(slow_call(&host, &upstream, 300), echo_meanwhile(&host));
    assert_eq!(slow.status, Status::Ok, "{slow:#?}");
    assert_eq!(
        slow.structured_content.as_ref().unwrap()["results"][0]["status"],
        200
    );
    assert_eq!(echo.status, Status::Ok, "{echo:#?}");
    assert_eq!(
        echo.structured_content,
        Some(json!({ "message": "queued", "length": 6 }))
    );
}

#[tokio::test]
async fn a_call_that_cannot_get_a_slot_within_its_deadline_is_gateway_busy() {
    let upstream = Upstream::start().await;
    // The slow call holds the slot until the host gives up on it (its 300 ms deadline plus
    // the host's grace for a guest blocked in a host call); the echo call gives up after its
    // own 300 ms.
    let host = host(&upstream, 300);
    let (slow, echo) = tokio::join!(slow_call(&host, &upstream, 5_000), echo_meanwhile(&host));
    assert_eq!(slow.outcome, OutcomeCode::ToolTimeout, "{slow:#?}");

    assert_eq!(echo.status, Status::Failed, "{echo:#?}");
    assert_eq!(echo.outcome, OutcomeCode::GatewayBusy);
    let error = echo.error.as_ref().unwrap();
    assert_eq!(error.code, "GATEWAY_BUSY");
    assert_eq!(error.kind, ErrorKind::Unavailable);
    assert!(error.retryable);
    assert!(
        error
            .message
            .contains("all 1 instance slots stayed busy for 3"),
        "{}",
        error.message
    );
    assert_eq!(echo.usage.as_ref().map_or(0, |u| u.fuel_consumed), 0);

    // Once the slot is free again, calls run.
    let after = echo_meanwhile(&host).await;
    assert_eq!(after.status, Status::Ok, "{after:#?}");
}

// Issue 9, item 5: one tenant's calls cannot starve another's.

/// [`slow_call`] as `tenant`.
async fn slow_call_as(host: &Host, upstream: &Upstream, tenant: &str) -> ToolResultEnvelope {
    let url = upstream.url("/delay/5000/x");
    host.call(ToolCallEnvelope::new(
        tenant,
        "test.egress-probe.read",
        json!({ "requests": [{ "method": "GET", "url": url }] }),
    ))
    .await
}

#[tokio::test]
async fn a_tenant_holding_its_share_of_slots_does_not_starve_another_tenant() {
    let upstream = Upstream::start().await;
    let host = HostBuilder::trusting(&["gatehouse.*", "test.*"], &[])
        .with(|config| {
            // Two slots, one per tenant (the default share is half, rounded up).
            config.sandbox.max_concurrent_calls = 2;
            // The slow probe gets a short deadline; tenant `good`'s echo keeps the default one.
            config.sandbox.plugins = serde_json::from_value(json!([
                { "id": EGRESS_PROBE.manifest().id(), "timeout_ms": 300 }
            ]))
            .unwrap();
        })
        .egress(json!({
            "max_total_ms": 10_000,
            "grant": [{
                "adapter": "test.egress-probe",
                "url": format!("http://127.0.0.1:{}/", upstream.port),
                "methods": ["GET"],
                "allow_private": ["127.0.0.0/8"],
            }],
        }))
        .adapters(&[EGRESS_PROBE, ECHO])
        .build();
    // Tenant `evil` sends two slow calls at once; tenant `good` calls meanwhile.
    let good = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        host.call(ToolCallEnvelope::new(
            "good",
            "gatehouse.echo.echo",
            json!({ "message": "mine" }),
        ))
        .await
    };
    let (first, second, good) = tokio::join!(
        slow_call_as(&host, &upstream, "evil"),
        slow_call_as(&host, &upstream, "evil"),
        good
    );
    assert_eq!(good.status, Status::Ok, "{good:#?}");
    let mut evil = [first.outcome, second.outcome];
    evil.sort_by_key(|o| o.as_str());
    assert_eq!(evil, [OutcomeCode::GatewayBusy, OutcomeCode::ToolTimeout]);
    let busy = if first.outcome == OutcomeCode::GatewayBusy {
        &first
    } else {
        &second
    };
    let error = busy.error.as_ref().unwrap();
    assert!(error.retryable);
    assert!(error.message.contains("tenant `evil`"), "{}", error.message);
}
