//! Traces: every governed call is a tree of [`tracing`] spans that continues the caller's W3C
//! trace, and (cargo feature `otlp`) is exported over OTLP.
//!
//! A front end that receives calls over a protocol (the MCP server of `gatehouse-server`)
//! opens its own span per request and makes it continue the caller's trace with
//! [`continue_remote`]; the call's spans below are then its children.
//!
//! The spans, all at INFO level:
//! - `mcp_call` (MCP only, opened by `gatehouse-server`): one `tools/call` request; its parent
//!   is the caller's `traceparent`, from `_meta["traceparent"]` (SEP-414) or else the HTTP
//!   header;
//! - `tool_call`: the governed pipeline, fields `tool_call_id`, `tool`, `trace_id` (the
//!   envelope's, which is the caller's trace id when it sent one);
//! - `policy` (one per module evaluated, field `module`), `adapter` (fields `adapter`,
//!   `capability`) and `egress` (one per upstream request, fields `method`, `destination`),
//!   children of `tool_call`.
//!
//! In the logs (`--log-format json`), each line carries the spans it was written in, so a
//! line from the egress gate names its call and trace. With the `otlp` feature and
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, `gatehouse`
//! exports the spans as OTLP/HTTP protobuf ([`otlp`]); then a `tool_call` span joins the
//! trace of its envelope's `trace_id` even when the caller is a library embedder that set only
//! that, and the `traceparent` sent upstream names the `egress` span as the parent, so the
//! upstream's spans hang under it. Without the feature, upstreams get the call's trace id with
//! a fresh span id.

use tracing::Span;

/// The span of one governed call (see the module docs), in trace `trace_id`.
pub(crate) fn call_span(tool_call_id: &str, tool: &str, trace_id: &str) -> Span {
    let span = tracing::info_span!("tool_call", tool_call_id, tool, trace_id);
    // A disabled span (no layer wants it) has no trace to join.
    #[cfg(feature = "otlp")]
    if !span.is_disabled() {
        otlp::join_trace(&span, trace_id);
    }
    span
}

/// Makes `span` continue the remote trace `traceparent` names (a valid W3C `traceparent`
/// header; anything else is ignored) when spans are exported (feature `otlp`); without the
/// feature, or when no layer reads `span`, it does nothing.
pub fn continue_remote(span: &Span, traceparent: &str) {
    #[cfg(feature = "otlp")]
    if !span.is_disabled() {
        otlp::continue_remote(span, traceparent);
    }
    #[cfg(not(feature = "otlp"))]
    let _ = (span, traceparent);
}

/// The `traceparent` header for an upstream request made in the current span, in trace
/// `trace_id`: the current span's id when spans are exported, otherwise a fresh one.
pub(crate) fn traceparent(trace_id: &str) -> String {
    #[cfg(feature = "otlp")]
    if let Some(header) = otlp::current_traceparent(trace_id) {
        return header;
    }
    gatehouse_core::ids::traceparent(trace_id)
}

#[cfg(feature = "otlp")]
pub mod otlp {
    //! OTLP export of the call spans (cargo feature `otlp`): [`layer`] builds the
    //! `tracing-opentelemetry` layer from the standard `OTEL_*` environment variables.

    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider,
    };
    use opentelemetry_otlp::WithExportConfig;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing::Span;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    /// Keeps the exporter running; [`Exporter::shutdown`] flushes the spans not yet sent.
    #[derive(Debug)]
    pub struct Exporter(SdkTracerProvider);

    impl Exporter {
        /// Sends what is buffered and stops the exporter (at most the exporter's timeout).
        pub fn shutdown(self) {
            if let Err(error) = self.0.shutdown() {
                tracing::warn!("OTLP trace export did not flush: {error}");
            }
        }
    }

    /// Whether the environment asks for OTLP export.
    pub fn configured() -> bool {
        [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ]
        .iter()
        .any(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()))
    }

    /// The export layer and its exporter, configured by the standard variables
    /// (`OTEL_EXPORTER_OTLP_ENDPOINT`, `..._TRACES_ENDPOINT`, `..._HEADERS`, `..._TIMEOUT`,
    /// `OTEL_SERVICE_NAME` (default `gatehouse`), `OTEL_BSP_*` for batching). The protocol is
    /// OTLP/HTTP with protobuf bodies over plain HTTP: export to a collector agent beside the
    /// gateway, which forwards over TLS. An `https` endpoint is refused here, at start-up.
    pub fn layer<S>() -> Result<
        (
            tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::SdkTracer>,
            Exporter,
        ),
        String,
    >
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        for var in [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ] {
            if let Ok(endpoint) = std::env::var(var)
                && endpoint
                    .trim_start()
                    .to_ascii_lowercase()
                    .starts_with("https:")
            {
                return Err(format!(
                    "{var}={endpoint}: this build exports OTLP over plain HTTP only; point it at a collector agent on this host (e.g. http://127.0.0.1:4318), which forwards over TLS"
                ));
            }
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .build()
            .map_err(|e| format!("cannot set up OTLP trace export: {e}"))?;
        let service = std::env::var("OTEL_SERVICE_NAME")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "gatehouse".to_owned());
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name(service)
                    .build(),
            )
            .build();
        let tracer = provider.tracer("gatehouse");
        Ok((
            tracing_opentelemetry::layer().with_tracer(tracer),
            Exporter(provider),
        ))
    }

    fn span_context(trace_id: &str, span_id: Option<&str>) -> Option<SpanContext> {
        let trace = TraceId::from_hex(trace_id).ok()?;
        // A trace the caller named without a parent span gets a placeholder parent, so the
        // call's spans carry the envelope's trace id.
        let span = SpanId::from_hex(span_id.unwrap_or(&gatehouse_core::ids::random_hex(8))).ok()?;
        let context = SpanContext::new(trace, span, TraceFlags::SAMPLED, true, TraceState::NONE);
        context.is_valid().then_some(context)
    }

    /// Makes `span` a child of the remote span `traceparent` names.
    pub(crate) fn continue_remote(span: &Span, traceparent: &str) {
        let Some(trace_id) = gatehouse_core::ids::trace_id_of(traceparent) else {
            return;
        };
        let parent_id = traceparent.split('-').nth(2);
        if let Some(parent) = span_context(trace_id, parent_id) {
            let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
        }
    }

    /// Makes `span` part of trace `trace_id` unless its parent already is.
    pub(crate) fn join_trace(span: &Span, trace_id: &str) {
        let current = Span::current().context();
        let inherited = current.span().span_context().trace_id();
        if TraceId::from_hex(trace_id).is_ok_and(|id| id == inherited) {
            return;
        }
        if let Some(parent) = span_context(trace_id, None) {
            let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
        }
    }

    /// `00-<trace>-<current span>-01` when the current span is exported in trace `trace_id`.
    pub(crate) fn current_traceparent(trace_id: &str) -> Option<String> {
        let context = Span::current().context();
        let span = context.span();
        let current = span.span_context();
        (current.is_valid() && current.trace_id().to_string() == trace_id)
            .then(|| format!("00-{}-{}-01", current.trace_id(), current.span_id()))
    }
}
