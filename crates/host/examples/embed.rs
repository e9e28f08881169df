//! Embedding gatehouse in a Rust gateway: build a host, install an adapter, serve one call.
//!
//! ```text
//! cargo run -p gatehouse-host --no-default-features --example embed -- gatehouse.toml echo.signed.wasm '{"message":"hi"}'
//! ```
//!
//! `gatehouse.toml` must trust the adapter's publisher (`[[trust.publisher]]`) and grant the
//! tool to tenant `demo` (`[[pipeline.tool]] tools = "gatehouse.echo.*"`, `tenants =
//! ["demo"]`); bind policies with `[[pipeline.policy]]` or set `policy_default = "allow"`.
//! Produce `echo.signed.wasm` with `gatehouse keygen` and `gatehouse pack`.

use gatehouse_host::{Host, HostConfig, ToolCallEnvelope};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(config), Some(adapter)) = (args.next(), args.next()) else {
        eprintln!("usage: embed CONFIG.toml ADAPTER.signed.wasm [ARGS_JSON]");
        std::process::exit(2);
    };
    let call_args = args
        .next()
        .unwrap_or_else(|| r#"{"message":"hi"}"#.to_owned());

    // 1. Build the host from the operator's config (everything denies by default).
    let host = Host::new(HostConfig::from_file(config.as_ref())?)?;
    // 2. Verify, compile and serve the adapter; its tools are `<adapter id>.<capability id>`.
    let plugin = host.install_adapter(&std::fs::read(&adapter)?)?;
    println!(
        "serving {} {} ({})",
        plugin.id, plugin.version, plugin.digest
    );
    println!("tools for tenant demo: {:?}", host.visible_tools("demo"));
    // 3. Submit one governed call and print the result envelope.
    let call = ToolCallEnvelope::new(
        "demo",
        format!("{}.echo", plugin.id),
        serde_json::from_str(&call_args)?,
    );
    let result = host.call(call).await;
    println!("{}", serde_json::to_string_pretty(&result)?);
    Ok(())
}
