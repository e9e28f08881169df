//! `test.oversized-output`: `run` returns one text block of `bytes` bytes of `x`
//! (default [`DEFAULT_BYTES`], 8 MiB), to exercise the host's output size limit; `error`
//! returns an error message that large; `log` writes `lines` forged log lines.

use gatehouse_sdk::{Adapter, Call, CallContext, ToolError, ToolOutput};
use serde::Deserialize;

/// 8 MiB: well above any sensible per-call output limit.
const DEFAULT_BYTES: usize = 8 << 20;

#[derive(Debug, Deserialize)]
struct RunArgs {
    /// Size of the text block in bytes.
    #[serde(default = "default_bytes")]
    bytes: usize,
}

fn default_bytes() -> usize {
    DEFAULT_BYTES
}

struct OversizedOutput;

impl Adapter for OversizedOutput {
    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        match call.capability() {
            "run" => Ok(run(&call.args()?)),
            // An error as large as `run`'s output: the error path is output too.
            "error" => {
                let args: RunArgs = call.args()?;
                Err(ToolError::upstream("HUGE", "e".repeat(args.bytes)))
            }
            // Log lines that try to forge host log records and drive the terminal.
            "log" => {
                for _ in 0..args_lines(call)? {
                    gatehouse_sdk::log::info(FORGED_LOG_LINE);
                }
                Ok(ToolOutput::text("logged"))
            }
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

/// One line that, unescaped, would end the host's log record and start a forged one, clear
/// the terminal and reverse the text after it.
const FORGED_LOG_LINE: &str =
    "ok\n2026-01-01T00:00:00Z  INFO gatehouse: FORGED approval granted\u{1b}[2J\u{202e}desrever";

#[derive(Debug, Deserialize)]
struct LogArgs {
    #[serde(default = "one")]
    lines: usize,
}

fn one() -> usize {
    1
}

fn args_lines(call: &Call) -> Result<usize, ToolError> {
    Ok(call.args::<LogArgs>()?.lines)
}

fn run(args: &RunArgs) -> ToolOutput {
    ToolOutput::text("x".repeat(args.bytes))
}

gatehouse_sdk::export_adapter!(OversizedOutput);

#[cfg(test)]
mod tests {
    use gatehouse_sdk::Content;

    use super::*;

    fn text_len(args: &str) -> usize {
        let out =
            OversizedOutput::invoke(&CallContext::default(), &Call::new("run", args)).unwrap();
        match out.content.as_slice() {
            [Content::Text(text)] => {
                assert!(text.bytes().all(|b| b == b'x'));
                text.len()
            }
            other => panic!("expected one text block, got {other:?}"),
        }
    }

    #[test]
    fn returns_the_requested_size() {
        assert_eq!(text_len(r#"{"bytes": 1000}"#), 1000);
        assert_eq!(text_len("{}"), 8 * 1024 * 1024);
    }
}
