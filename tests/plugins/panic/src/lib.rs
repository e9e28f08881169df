//! `test.panic`: `run` panics with the message [`MESSAGE`], which the host's tests look for.

use gatehouse_sdk::{Adapter, Call, CallContext, ToolError, ToolOutput};

/// The panic message.
const MESSAGE: &str = "panic plugin: deliberate panic";

struct Panic;

impl Adapter for Panic {
    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        match call.capability() {
            "run" => panic!("{MESSAGE}"),
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

gatehouse_sdk::export_adapter!(Panic);
