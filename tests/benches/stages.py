#!/usr/bin/env python3
"""Per-stage CPU budget of a `gatehouse serve` process from a `perf script` dump.

Usage: perf script -i perf.data | tests/benches/stages.py USER_US_PER_CALL KERNEL_US_PER_CALL

Each user-space sample (recorded with DWARF call graphs, `perf record -e cpu-clock:u
--call-graph dwarf -p <pid>`) is charged to exactly one stage: walking its stack from the leaf
up, the first frame that names a stage wins, so an allocation or a copy is charged to the code
that asked for it. A sample no frame names is `runtime` (tokio's scheduler, the allocator with
no known caller). Frames perf cannot symbolize inside the wasmtime call are the guest's
compiled code (`invoke`) when they are the leaf; elsewhere they are frames the unwinder lost.
Stages in OWNERS (the audit log) take every sample with one of their frames anywhere on the
stack, whatever its leaf. The samples' shares are scaled to the user CPU per call the load
bench measured for the same server and load; kernel time is the bench's system CPU per call
(perf cannot sample the kernel at perf_event_paranoid 2). So the rows add up to the total.
"""

import re
import sys

# Stages that own everything under them, whatever the leaf: a sample with such a frame anywhere
# on its stack is charged to it (the audit log's serialization, hashing and SQLite work, on the
# call's task or the store's writer thread).
OWNERS = [
    ("record (audit log)", r"gatehouse_host::pipeline::record|gatehouse_store::|rusqlite|sqlite3"),
]
# (stage, pattern over a demangled frame), tried in order on each frame.
STAGES = [
    ("identity", r"gatehouse_host::mcp::identity"),
    ("result mapping", r"gatehouse_host::mcp::result"),
    ("serialization", r"serde_json::ser|serde::ser|Serialize"),
    ("envelope", r"gatehouse_host::envelope|gatehouse_host::mcp::handler|gatehouse_host::mcp::aliases"),
    ("normalize", r"gatehouse_host::pipeline::normalize"),
    ("validate", r"gatehouse_host::pipeline::validate|jsonschema|referencing::"),
    ("policy", r"gatehouse_host::policy|run_policy|prepare_policy"),
    ("verify", r"gatehouse_host::pipeline::verify"),
    ("instance", r"instantiate|InstancePre|pooling|allocator::|memory_image|Store<.*>::new|StoreOpaque::new|prepare_adapter|CallState|WasiCtx|Linker"),
    ("invoke", r"wasmtime|cranelift|gatehouse_host::sandbox|gatehouse_host::pipeline::invoke|wasi|\[unknown\]|JIT"),
    ("other gates", r"gatehouse_host::pipeline|gatehouse_store::|gatehouse_host::host|gatehouse_host::metrics|rusqlite"),
    ("JSON-RPC", r"rmcp|serde_json|serde::de"),
    ("HTTP", r"hyper|http::|h1::|tokio::net|mio::|http_body"),
]
COMPILED = [(stage, re.compile(pattern)) for stage, pattern in STAGES]
OWNED = [(stage, re.compile(pattern)) for stage, pattern in OWNERS]


def samples(lines):
    """Yields each sample's frames (leaf first) from `perf script` text."""
    frames, in_sample = [], False
    for line in lines:
        if not line.strip():
            if in_sample:
                yield frames
            frames, in_sample = [], False
        elif line[0] in " \t":
            # "\t    addr symbol+off (dso)"
            parts = line.strip().split(" ", 1)
            frames.append(parts[1] if len(parts) > 1 else parts[0])
        else:
            in_sample = True
    if in_sample:
        yield frames


def stage_of(frames):
    for stage, pattern in OWNED:
        if any(pattern.search(frame) for frame in frames):
            return stage
    for i, frame in enumerate(frames):
        # An unsymbolized frame is guest code only as the leaf; above it, it is a frame the
        # DWARF unwinder lost (deep async stacks), which names nothing.
        if i > 0 and frame.startswith("[unknown]"):
            continue
        for stage, pattern in COMPILED:
            if pattern.search(frame):
                return stage
    return "runtime"


def main():
    user_us, kernel_us = float(sys.argv[1]), float(sys.argv[2])
    counts = {}
    for frames in samples(sys.stdin):
        stage = stage_of(frames)
        counts[stage] = counts.get(stage, 0) + 1
    total = sum(counts.values())
    order = [stage for stage, _ in STAGES] + [stage for stage, _ in OWNERS] + ["runtime"]
    print(f"| stage | share of user samples | CPU us per call |")
    print(f"|---|---|---|")
    for stage in order:
        n = counts.get(stage, 0)
        print(f"| {stage} | {100.0 * n / total:.1f}% | {user_us * n / total:.1f} |")
    print(f"| kernel | | {kernel_us:.1f} |")
    print(f"| **total** | {total} samples | {user_us + kernel_us:.1f} |")


if __name__ == "__main__":
    main()
