//! What needs the parts a host holds together: the WebAssembly engine ([`Sandbox`]) beside a
//! stdio server behind its egress proxy. Needs bubblewrap (`.ci/run` installs it).

use gatehouse_core::model::ApprovalMode;
use serde_json::json;

use crate::egress::tests::Upstream;
use crate::egress::tests::proxy::{call, grants, served};
use crate::sandbox::{Sandbox, SandboxConfig};

/// A server holds no descriptor of the gateway's: only its standard streams, not the pipes
/// bubblewrap is given to put its proxy in, nor the `/proc/self/pagemap` wasmtime's pooling
/// allocator re-opens after a fork without close-on-exec (an engine is made first, as in the
/// gateway).
#[tokio::test]
async fn the_server_inherits_only_its_standard_streams() {
    let _engine = Sandbox::new(SandboxConfig::default()).unwrap();
    let upstream = Upstream::start().await;
    let served = served(&grants(&upstream, &upstream, &upstream), true);
    let (text, _) = call(&served, ApprovalMode::ReadOnly, "fds", json!({})).await;
    let held: std::collections::BTreeMap<String, String> = serde_json::from_str(&text).unwrap();
    assert_eq!(
        held.keys().map(String::as_str).collect::<Vec<_>>(),
        ["0", "1", "2"],
        "{held:?}"
    );
}
