//! The `gatehouse` binary; see [`gatehouse_cli`].

/// mimalloc rather than glibc's malloc: under load the MCP server spent a fifth of its user CPU
/// per call in glibc's allocator (fastbin consolidation after hyper's read buffers and the
/// audit entry's text), and mimalloc cut the server's CPU per call by a fifth or more (`docs/benchmarks.md`,
/// the third round). A library embedder keeps its own global allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    gatehouse_cli::main()
}
