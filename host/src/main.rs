//! The `gatehouse` binary; see [`gatehouse_host::cli`].

fn main() -> std::process::ExitCode {
    gatehouse_host::cli::main()
}
