//! `test.ambient-probe`: `run` reaches for the environment, the filesystem, sockets and HTTP,
//! and returns what each attempt got as structured JSON, so the host's tests can assert that
//! a plugin has no ambient authority.

use gatehouse_sdk::adapter::bindings::wasi::http::{outgoing_handler, types};
use gatehouse_sdk::serde_json::json;
use gatehouse_sdk::{Adapter, Call, CallContext, ToolError, ToolOutput};

struct Probe;

impl Adapter for Probe {
    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        match call.capability() {
            "run" => Ok(ToolOutput::new().with_structured(json!({
                "env_vars": std::env::vars().count(),
                "args": std::env::args().count(),
                "read_root_dir": outcome(std::fs::read_dir("/").map(|_| ())),
                "read_passwd": outcome(std::fs::read("/etc/passwd").map(|_| ())),
                "write_tmp": outcome(std::fs::write("/tmp/gatehouse-probe", b"x")),
                "tcp_connect": outcome(std::net::TcpStream::connect("127.0.0.1:80").map(|_| ())),
                "udp_bind": outcome(std::net::UdpSocket::bind("0.0.0.0:0").map(|_| ())),
                "http_get": http_get(),
            }))),
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

fn outcome(result: std::io::Result<()>) -> String {
    match result {
        Ok(()) => "allowed".to_owned(),
        Err(e) => format!("error: {e}"),
    }
}

/// A plain GET through `wasi:http/outgoing-handler`, the one egress path.
fn http_get() -> String {
    let request = types::OutgoingRequest::new(types::Fields::new());
    let _ = request.set_scheme(Some(&types::Scheme::Http));
    let _ = request.set_authority(Some("example.com"));
    let _ = request.set_path_with_query(Some("/"));
    let response = match outgoing_handler::handle(request, None) {
        Ok(response) => response,
        Err(code) => return format!("error: {code:?}"),
    };
    response.subscribe().block();
    match response.get() {
        Some(Ok(Ok(_))) => "allowed".to_owned(),
        Some(Ok(Err(code))) => format!("error: {code:?}"),
        other => format!("error: unexpected {other:?}"),
    }
}

gatehouse_sdk::export_adapter!(Probe);
