//! The README's quick start, as a new operator runs it: from an empty folder, with a temporary
//! HOME, `gatehouse import ... --config gatehouse.toml`, `gatehouse serve --config
//! gatehouse.toml`, and a call from an MCP client without a key. No file is edited by hand.
//! Each path is a real server: npm's `@modelcontextprotocol/server-memory` (a write into the
//! directory granted to it) and PyPI's `mcp-server-time` (a read), both stdio servers in the
//! sandbox, merged into one config by two imports; and an OpenAPI service on loopback (a read
//! and a write, with the service's key injected by the gateway).

use std::process::Command;

use gatehouse_tests::cli::{child_output, gatehouse_child};
use gatehouse_tests::free_port;
use gatehouse_tests::gateway::{Gateway, Serve};
use gatehouse_tests::mcp::{Client, client, rmcp_call, texts};
use gatehouse_tests::stdio::{MEMORY, TIME, open_dir};
use gatehouse_tests::upstream::Upstream;
use serde_json::{Value, json};

/// An operator's folder and home: a temporary HOME (the store and anything else the commands
/// keep under it), and the folder the commands run in.
struct Operator {
    folder: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Operator {
    fn new() -> Self {
        Self {
            // Under a root gateway a stdio server runs as a user of its own: it must be able
            // to reach the folder (its packages and data directory are in it).
            folder: open_dir(),
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.folder.path().join(name)
    }

    /// `gatehouse ARGS` in the folder, with the temporary HOME: the exit code and what it
    /// printed.
    fn run(&self, args: &[&str]) -> (i32, String) {
        child_output(self.command(args))
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = gatehouse_child(&json!(args));
        command
            .current_dir(self.folder.path())
            .env("HOME", self.home.path())
            .env_remove("XDG_DATA_HOME")
            .env_remove("GATEHOUSE_CONFIG");
        command
    }

    /// `gatehouse serve --config gatehouse.toml` on a free port (the config's own listener is
    /// 8787, which a test cannot count on), with the temporary HOME and `env`.
    async fn serve(&self, env: &[(&str, &str)]) -> (Gateway, Client) {
        let port = free_port();
        let mut serve = Serve::config(self.path("gatehouse.toml"))
            .listen(port)
            .env("HOME", self.home.path().display().to_string());
        for (name, value) in env {
            serve = serve.env(name, value);
        }
        let gateway = serve.start().await;
        // An agent without a key: the config admits anonymous callers on loopback.
        let client = client(&format!("http://127.0.0.1:{port}/mcp"), None).await;
        (gateway, client)
    }

    /// The config the imports wrote, as a table.
    fn config(&self) -> toml::Table {
        toml::from_str(&std::fs::read_to_string(self.path("gatehouse.toml")).unwrap()).unwrap()
    }
}

/// A pet shop on loopback `port`, described in OpenAPI 3.0: a read, a write and a delete, with
/// a bearer key.
fn pets_json(port: u16) -> String {
    json!({
        "openapi": "3.0.3",
        "info": { "title": "Pets", "version": "1" },
        "servers": [{ "url": format!("http://127.0.0.1:{port}/v1") }],
        "components": { "securitySchemes": { "bearerAuth": { "type": "http", "scheme": "bearer" } } },
        "security": [{ "bearerAuth": [] }],
        "paths": {
            "/pets": {
                "get": { "operationId": "listPets" },
                "post": { "operationId": "addPet", "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object" } } } } },
            },
            "/pets/{petId}": {
                "parameters": [{ "name": "petId", "in": "path", "required": true, "schema": { "type": "integer" } }],
                "get": { "operationId": "getPet" },
                "delete": { "operationId": "deletePet" },
            },
        },
    })
    .to_string()
}

/// The length of the array `key` of the table `section` of `config`.
fn entries(config: &toml::Table, section: &str, key: &str) -> usize {
    config[section][key].as_array().map_or(0, Vec::len)
}

/// Asserts that `printed` holds each of `words`.
fn says(printed: &str, words: &[&str]) {
    for words in words {
        assert!(printed.contains(words), "{words}\n{printed}");
    }
}

/// Calls `tool` with `args` (and `key` as its idempotency key, if any): the result's text and
/// the call's outcome code.
async fn call(client: &Client, tool: &str, mut args: Value, key: Option<&str>) -> (String, Value) {
    if let Some(key) = key {
        args["idempotency_key"] = json!(key);
    }
    let (result, record) = rmcp_call(client, tool, args, json!({})).await;
    (texts(&result).join(""), record["outcome"].clone())
}

/// Two stdio servers, each behind gatehouse in three commands; the second import merges into
/// the first one's config, and both then answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stdio_servers_are_served_in_three_commands_each_from_one_config() {
    let operator = Operator::new();
    let packages = operator.path("packages");

    // 1. Import the time server into a config that does not exist yet.
    let (code, printed) = operator.run(&[
        "import",
        "mcp",
        "--stdio",
        "--id",
        "time",
        "--config",
        "gatehouse.toml",
        "--packages-dir",
        packages.to_str().unwrap(),
        "--",
        "uvx",
        TIME,
    ]);
    assert_eq!(code, 0, "{printed}");
    says(
        &printed,
        &[
            "get_current_time  get_current_time  observe  read_only",
            "wrote ./publisher.secret.toml: a fresh signing key",
            "wrote gatehouse.toml:",
            "trust: key `publisher` may publish `time`",
            "callers: anonymous, as tenant `default`, on the loopback listener 127.0.0.1:8787 only",
            "policy default: allow",
            "next: gatehouse serve --config gatehouse.toml",
        ],
    );
    let written = std::fs::read_to_string(operator.path("gatehouse.toml")).unwrap();
    says(
        &written,
        &[
            "#   time.get_current_time  observe  read_only",
            "# loopback listener only.",
            "policy_default = \"allow\"",
        ],
    );

    // 2. Serve it; 3. call it.
    let (gateway, agent) = operator.serve(&[]).await;
    let (text, outcome) = call(
        &agent,
        "time.get_current_time",
        json!({ "timezone": "Europe/Paris" }),
        None,
    )
    .await;
    assert_eq!(outcome, "OK", "{text}\n{}", gateway.log());
    assert!(text.contains("\"timezone\": \"Europe/Paris\""), "{text}");
    drop(agent);
    gateway.stop().await;

    // The memory server keeps its graph in the file MEMORY_FILE_PATH names, in a directory
    // granted to it read-write.
    let data = operator.path("data");
    let memory_file = data.join("memory.json");
    let env = format!("MEMORY_FILE_PATH={}", memory_file.display());
    let import_memory = |dir: &str| {
        operator.run(&[
            "import",
            "mcp",
            "--stdio",
            "--id",
            "memory",
            "--config",
            "gatehouse.toml",
            "--dir",
            dir,
            "--env",
            &env,
            "--",
            "npx",
            "-y",
            MEMORY,
        ])
    };

    // A server whose files would lie where it may write is refused, and nothing is written.
    let before = std::fs::read_to_string(operator.path("gatehouse.toml")).unwrap();
    let (code, printed) = import_memory(".:rw");
    assert_eq!(code, 2, "{printed}");
    assert!(
        printed.contains("lies within --dir") && printed.contains("which the server may write"),
        "{printed}"
    );
    assert_eq!(
        std::fs::read_to_string(operator.path("gatehouse.toml")).unwrap(),
        before
    );
    assert!(!operator.path("memory").exists());

    // 1. Import the memory server into the same config, with the data directory, which the
    // import makes; its packages go where the config says, without --packages-dir.
    let (code, printed) = import_memory("./data:rw");
    assert_eq!(code, 0, "{printed}");
    says(
        &printed,
        &[
            "create_entities      create_entities      act      network",
            "delete_entities      delete_entities      act      destructive  destructiveHint; approval gate IMPORTED_DESTRUCTIVE",
            &format!("note: made {} for the server to write in", data.display()),
            "merged the import into gatehouse.toml:",
            "trust: key `publisher` may publish `memory`",
            "callers: as the config's [mcp] table admits them (unchanged)",
            "policy default: allow (unchanged)",
        ],
    );
    assert!(
        std::fs::read_dir(packages.join("npm")).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("server-memory")),
        "installed into the config's packages_dir"
    );
    let config = operator.config();
    assert_eq!(entries(&config, "trust", "publisher"), 1, "{config}");
    assert_eq!(entries(&config, "stdio", "server"), 2, "{config}");
    assert_eq!(entries(&config, "pipeline", "tool"), 2, "{config}");
    assert_eq!(entries(&config, "plugins", "adapters"), 2, "{config}");

    // 2. Serve both; 3. a write reaches the memory server's file, and the time server answers.
    let (gateway, agent) = operator.serve(&[]).await;
    let ada = json!({ "entities": [{ "name": "Ada", "entityType": "person", "observations": ["wrote the first program"] }] });
    let (text, outcome) = call(&agent, "memory.create_entities", ada, Some("ada-1")).await;
    assert_eq!(outcome, "OK", "{text}\n{}", gateway.log());
    let kept = std::fs::read_to_string(&memory_file).unwrap();
    assert!(kept.contains("\"name\":\"Ada\""), "{kept}");
    let (text, outcome) = call(&agent, "memory.read_graph", json!({}), None).await;
    assert_eq!(outcome, "OK", "{text}");
    assert!(text.contains("wrote the first program"), "{text}");
    let (text, outcome) = call(
        &agent,
        "time.convert_time",
        json!({ "source_timezone": "Europe/Paris", "time": "12:00", "target_timezone": "Asia/Tokyo" }),
        None,
    )
    .await;
    assert_eq!(outcome, "OK", "{text}");
    assert!(text.contains("Asia/Tokyo"), "{text}");
    drop(agent);
    gateway.stop().await;
}

/// An OpenAPI service on loopback behind gatehouse in three commands: a read, and a write that
/// runs once for its key, each reaching the service with the key the gateway injects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openapi_service_is_served_in_three_commands() {
    const TOKEN: &str = "pets-token-quick-3f2a";
    let service = Upstream::start().await;
    let operator = Operator::new();
    std::fs::write(operator.path("pets.json"), pets_json(service.port)).unwrap();

    let (code, printed) = operator.run(&[
        "import",
        "openapi",
        "pets.json",
        "--id",
        "pets",
        "--config",
        "gatehouse.toml",
    ]);
    assert_eq!(code, 0, "{printed}");
    says(
        &printed,
        &[
            "GET /pets             listpets    observe  read_only",
            "DELETE /pets/{petId}  deletepet   act      destructive  DELETE; approval gate IMPORTED_DESTRUCTIVE",
            "egress: `pets` may reach http://127.0.0.1:",
            "policy default: allow",
        ],
    );
    let written = std::fs::read_to_string(operator.path("gatehouse.toml")).unwrap();
    assert!(
        written.contains("#   pets.deletepet  act      destructive  approval gate"),
        "{written}"
    );
    assert!(written.contains("env = \"PETS_BEARERAUTH\""), "{written}");

    let (gateway, agent) = operator.serve(&[("PETS_BEARERAUTH", TOKEN)]).await;
    let (text, outcome) = call(&agent, "pets.getpet", json!({ "petId": 7 }), None).await;
    assert_eq!(outcome, "OK", "{text}\n{}", gateway.log());
    let pet = json!({ "body": { "name": "Rex" } });
    for _ in 0..2 {
        let (text, outcome) = call(&agent, "pets.addpet", pet.clone(), Some("rex-1")).await;
        assert_eq!(outcome, "OK", "{text}");
    }
    // A destructive call waits for a person: nothing is sent.
    let (_, outcome) = call(
        &agent,
        "pets.deletepet",
        json!({ "petId": 7 }),
        Some("del-1"),
    )
    .await;
    assert_eq!(outcome, "APPROVAL_REQUIRED");

    let seen = service.seen();
    let sent: Vec<(String, String)> = seen
        .iter()
        .map(|s| (s.method.clone(), s.path.clone()))
        .collect();
    assert_eq!(
        sent,
        [
            ("GET".to_owned(), "/v1/pets/7".to_owned()),
            ("POST".to_owned(), "/v1/pets".to_owned())
        ],
        "the read once, the write once for its key, no delete"
    );
    for request in &seen {
        assert_eq!(
            request.headers["authorization"],
            format!("Bearer {TOKEN}").as_str()
        );
    }
    drop(agent);
    gateway.stop().await;
}
