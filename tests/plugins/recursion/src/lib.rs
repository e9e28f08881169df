//! `test.recursion`: `run` recurses without bound. Only the host's stack limit stops it.

use std::hint::black_box;

use gatehouse_sdk::{Adapter, Call, CallContext, ToolError, ToolOutput};

struct Recursion;

impl Adapter for Recursion {
    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        match call.capability() {
            "run" => Ok(ToolOutput::text(descend(black_box(0)).to_string())),
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

/// Never returns in practice: 2^64 frames do not fit in any stack.
///
/// The recursive result is used after the call (`* 31 + depth`, not a single associative
/// accumulator), so the call is not in tail position and LLVM cannot turn it into a loop; and
/// the starting depth comes through `black_box`, so nothing is folded at compile time. No
/// local has its address taken, so each frame lives on the wasm call stack only, not on the
/// shadow stack in linear memory: the host sees a stack overflow, not a memory fault.
#[inline(never)]
fn descend(depth: u64) -> u64 {
    if depth == u64::MAX {
        return 0;
    }
    descend(depth + 1).wrapping_mul(31).wrapping_add(depth)
}

gatehouse_sdk::export_adapter!(Recursion);
