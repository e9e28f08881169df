//! The crate graph as cargo resolves it (`cargo tree`), held against the one drawn in
//! `crates/host/README.md`: each crate depends only on the crates below it, and an embedder's
//! `gatehouse-host` without default features compiles neither clap, nor rmcp, nor a PostgreSQL
//! driver until it asks for one, and asks nothing of hyper's server. (wasmtime-wasi-http, which
//! the sandbox links for `wasi:http`, depends on hyper with its `full` feature set, server
//! included, whatever gatehouse asks: that one way in is the only one allowed.)

use std::collections::BTreeSet;
use std::process::Command;

/// `cargo tree` of the workspace with these arguments, one `name version` line per package (an
/// inverted tree: each line prefixed with its depth).
fn tree(args: &[&str]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let prefix = if args.contains(&"--invert") {
        "depth"
    } else {
        "none"
    };
    let output = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "--offline", "--prefix", prefix])
        .args(args)
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo tree {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The packages named in `lines`.
fn names(lines: &[String]) -> BTreeSet<String> {
    lines
        .iter()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// In an inverted `cargo tree --prefix depth` (`lines`), what turns `node` on: the nodes one
/// level below each of its occurrences (packages up to their version, `name v`).
fn enablers(lines: &[String], node: &str) -> Vec<String> {
    let parsed: Vec<(usize, &str)> = lines
        .iter()
        .filter_map(|line| {
            let digits = line.chars().take_while(char::is_ascii_digit).count();
            let text = line[digits..].trim_end_matches(" (*)");
            Some((line[..digits].parse().ok()?, text))
        })
        .collect();
    let mut found = BTreeSet::new();
    for (index, &(level, text)) in parsed.iter().enumerate() {
        if !text.starts_with(node) {
            continue;
        }
        for &(next_level, next) in parsed[index + 1..]
            .iter()
            .take_while(|(next_level, _)| *next_level > level)
        {
            if next_level == level + 1 {
                let name = match next.find(" v") {
                    Some(at) if !next.contains(" feature ") => &next[..at + 2],
                    _ => next,
                };
                found.insert(name.to_owned());
            }
        }
    }
    found.into_iter().collect()
}

#[test]
fn an_embedders_host_compiles_no_command_line_server_or_postgres_driver() {
    let embedder = tree(&[
        "--package",
        "gatehouse-host",
        "--no-default-features",
        "--edges",
        "normal",
    ]);
    let packages = names(&embedder);
    for unwanted in [
        "clap",
        "rmcp",
        "tokio-postgres",
        "deadpool-postgres",
        "gatehouse-server",
        "gatehouse-cli",
    ] {
        assert!(
            !packages.contains(unwanted),
            "gatehouse-host without default features compiles {unwanted}"
        );
    }
    assert!(packages.contains("wasmtime") && packages.contains("gatehouse-store"));
    // Who turns hyper's `server` feature on: its own `full`, which wasmtime-wasi-http asks, and
    // the host itself for one listener, a stdio server's egress proxy inside its sandbox
    // (`egress::proxy`); no command line, no MCP or admin server.
    let hyper = tree(&[
        "--package",
        "gatehouse-host",
        "--no-default-features",
        "--edges",
        "normal,features",
        "--invert",
        "hyper",
    ]);
    assert_eq!(
        enablers(&hyper, "hyper feature \"server\""),
        ["gatehouse-host v", "hyper feature \"full\""],
        "{hyper:#?}"
    );
    assert_eq!(
        enablers(&hyper, "hyper feature \"full\""),
        ["wasmtime-wasi-http v"],
        "{hyper:#?}"
    );
    // Asked for, the driver comes: the check above can fail.
    let with_postgres = tree(&[
        "--package",
        "gatehouse-host",
        "--no-default-features",
        "--features",
        "postgres",
        "--edges",
        "normal",
    ]);
    assert!(names(&with_postgres).contains("tokio-postgres"));
}

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    let order = [
        "gatehouse-cedar",
        "gatehouse-guardrails",
        "gatehouse-core",
        "gatehouse-store",
        "gatehouse-host",
        "gatehouse-server",
        "gatehouse-cli",
    ];
    for (level, crate_name) in order.iter().enumerate() {
        let direct = tree(&[
            "--package",
            crate_name,
            "--edges",
            "normal,build",
            "--depth",
            "1",
        ]);
        let ours: BTreeSet<String> = names(&direct)
            .into_iter()
            .filter(|name| order.contains(&name.as_str()) && name != crate_name)
            .collect();
        let below: BTreeSet<String> = order[..level].iter().map(|c| (*c).to_owned()).collect();
        assert!(
            ours.is_subset(&below),
            "{crate_name} depends on {:?}, above it in crates/host/README.md",
            ours.difference(&below).collect::<Vec<_>>()
        );
    }
    // gatehouse-cedar, gatehouse-guardrails, gatehouse-core and gatehouse-store build beside
    // wasmtime, not after it.
    for crate_name in [
        "gatehouse-cedar",
        "gatehouse-guardrails",
        "gatehouse-core",
        "gatehouse-store",
    ] {
        let all = names(&tree(&["--package", crate_name, "--edges", "normal"]));
        assert!(
            !all.contains("wasmtime"),
            "{crate_name} depends on wasmtime"
        );
    }
}
