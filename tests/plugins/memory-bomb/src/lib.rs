//! `test.memory-bomb`: `run` keeps allocating 1 MiB chunks filled with non-zero bytes (so every
//! page is written, not just reserved) and never frees them. Only the host's memory limit
//! stops it: the allocation that the limit refuses aborts the guest.

use std::hint::black_box;

use gatehouse_sdk::{Adapter, Call, CallContext, ToolError, ToolOutput};

const CHUNK_BYTES: usize = 1 << 20;

struct MemoryBomb;

impl Adapter for MemoryBomb {
    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        match call.capability() {
            "run" => hoard(),
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

fn hoard() -> ! {
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    loop {
        chunks.push(vec![0xA5; CHUNK_BYTES]);
        // Keep the chunks observable so the allocations cannot be optimized away.
        black_box(&chunks);
    }
}

gatehouse_sdk::export_adapter!(MemoryBomb);
