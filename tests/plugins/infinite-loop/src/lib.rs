//! `test.infinite-loop`: `run` spins forever without allocating or calling the host, so only
//! fuel or an epoch deadline can stop it.

use std::hint::black_box;

use gatehouse_sdk::{Adapter, Call, CallContext, ToolError, ToolOutput};

struct InfiniteLoop;

impl Adapter for InfiniteLoop {
    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        match call.capability() {
            "run" => spin(),
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

/// `black_box` keeps the optimizer from proving the loop useless and deleting it.
fn spin() -> ! {
    let mut counter: u64 = 0;
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

gatehouse_sdk::export_adapter!(InfiniteLoop);
