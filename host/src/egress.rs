//! The egress gate: the one path out of an adapter.
//!
//! Adapters reach the outside world only through `wasi:http/outgoing-handler`, which the host
//! implements here (wasmtime-wasi-http's `WasiHttpHooks::send_request`, built without its
//! permissive default sender, so no other path exists). Operator grants are not implemented
//! yet, so the gate denies every request: the guest gets `HTTP-request-denied` and the attempt
//! is recorded on the call with the reason.

use std::future::Future;

use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpHooks};

/// One outbound request an adapter attempted during a call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EgressAttempt {
    /// HTTP method.
    pub method: String,
    /// Destination URI as the guest gave it.
    pub uri: String,
    /// Whether the gate let it through.
    pub allowed: bool,
    /// Why it was allowed or denied.
    pub reason: String,
}

/// The per-call egress gate. Denies everything: no grants exist yet.
#[derive(Debug, Default)]
pub struct EgressGate {
    attempts: Vec<EgressAttempt>,
}

/// Attempts beyond this many are not recorded individually (a looping adapter cannot grow the
/// call record without bound); the count of dropped records is kept instead.
const MAX_RECORDED_ATTEMPTS: usize = 64;

impl EgressGate {
    /// The attempts made so far.
    pub fn attempts(&self) -> &[EgressAttempt] {
        &self.attempts
    }

    /// Takes the recorded attempts.
    pub fn take_attempts(&mut self) -> Vec<EgressAttempt> {
        std::mem::take(&mut self.attempts)
    }
}

type SendFuture = Box<
    dyn Future<
            Output = wasmtime_wasi_http::Result<(
                http::Response<WasiBody>,
                Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
            )>,
        > + Send,
>;

impl WasiHttpHooks for EgressGate {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _response_done: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> SendFuture {
        if self.attempts.len() < MAX_RECORDED_ATTEMPTS {
            self.attempts.push(EgressAttempt {
                method: request.method().to_string(),
                uri: request.uri().to_string(),
                allowed: false,
                reason: "no egress is granted to adapters (egress grants are not configurable yet)"
                    .to_owned(),
            });
        }
        tracing::info!(method = %request.method(), uri = %request.uri(), "egress denied");
        Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) })
    }
}
