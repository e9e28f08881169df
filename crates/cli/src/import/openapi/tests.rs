//! The importer against small documents: what each construct becomes, and every refusal.

use gatehouse_host::plugin::manifest::Manifest;
use serde_json::json;

use super::*;

const PETSTORE_30: &str = r##"{
  "openapi": "3.0.3",
  "info": { "title": "Petstore", "version": "1" },
  "servers": [{ "url": "http://127.0.0.1:{port}/{base}", "variables": { "port": { "default": "8080" }, "base": { "default": "v1" } } }],
  "components": {
    "securitySchemes": {
      "bearerAuth": { "type": "http", "scheme": "bearer" },
      "queryKey": { "type": "apiKey", "in": "query", "name": "key" }
    },
    "parameters": { "PetId": { "name": "petId", "in": "path", "required": true, "schema": { "type": "integer" } } },
    "schemas": {
      "Pet": { "type": "object", "required": ["name"], "properties": {
        "name": { "type": "string" }, "tag": { "type": "string", "nullable": true },
        "age": { "type": "integer", "minimum": 0, "exclusiveMinimum": true },
        "parent": { "$ref": "#/components/schemas/Pet" } } }
    }
  },
  "paths": {
    "/pets": {
      "get": { "operationId": "listPets", "summary": "List pets",
        "parameters": [{ "name": "tags", "in": "query", "schema": { "type": "array", "items": { "type": "string" } } },
                       { "name": "x-trace", "in": "header", "schema": { "type": "string" } }] },
      "post": { "operationId": "addPet", "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Pet" } } } } }
    },
    "/pets/{petId}": {
      "parameters": [{ "$ref": "#/components/parameters/PetId" }],
      "get": { "operationId": "getPet" },
      "delete": { "operationId": "deletePet" }
    },
    "/pets/{petId}/photo": {
      "post": { "operationId": "uploadPhoto", "requestBody": { "content": { "multipart/form-data": { "schema": { "type": "object" } } } } }
    },
    "/session": { "get": { "operationId": "whoami", "parameters": [{ "name": "sid", "in": "cookie", "schema": { "type": "string" } }] } }
  }
}"##;

fn options() -> Options {
    Options::new("test.petstore")
}

fn error(text: &str) -> String {
    import(text, None, &options()).unwrap_err().to_string()
}

#[test]
fn imports_each_operation_kind() {
    let import = import(PETSTORE_30, None, &options()).unwrap();
    let ids: Vec<&str> = import
        .manifest
        .capabilities
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["listpets", "addpet", "getpet", "deletepet"]);
    let by_id = |id: &str| import.manifest.capability(id).unwrap();

    let list = by_id("listpets");
    assert_eq!(
        (list.capability_class, list.approval_mode),
        (CapabilityClass::Observe, ApprovalMode::ReadOnly)
    );
    assert_eq!(
        list.upstream,
        Some(json!({
            "method": "GET", "url": "http://127.0.0.1:8080/v1/pets", "body": false,
            "parameters": [
                { "name": "tags", "in": "query", "argument": "tags", "explode": true },
                { "name": "x-trace", "in": "header", "argument": "x-trace", "explode": true },
            ],
        }))
    );

    let add = by_id("addpet");
    assert_eq!(
        (add.capability_class, add.approval_mode),
        (CapabilityClass::Act, ApprovalMode::Network)
    );
    // The key follows from the class; the manifest does not repeat it.
    assert!(add.requires_idempotency_key());
    assert_eq!(add.idempotency, None);
    let pet = &add.input_schema["properties"]["body"];
    assert_eq!(add.input_schema["required"], json!(["body"]));
    assert_eq!(
        pet["properties"]["tag"]["type"],
        json!(["string", "null"]),
        "3.0 nullable"
    );
    assert_eq!(
        pet["properties"]["age"]["exclusiveMinimum"],
        json!(0),
        "3.0 boolean bound"
    );
    assert!(pet["properties"]["age"].get("minimum").is_none());
    assert_eq!(
        pet["properties"]["parent"],
        json!({ "description": "recursive: another #/components/schemas/Pet" })
    );

    let get = by_id("getpet");
    assert_eq!(get.input_schema["required"], json!(["petId"]));
    assert_eq!(
        get.input_schema["properties"]["petId"],
        json!({ "type": "integer" })
    );
    let delete = by_id("deletepet");
    assert_eq!(delete.approval_mode, ApprovalMode::Destructive);
    assert_eq!(delete.approval_gate.as_deref(), Some(DESTRUCTIVE_GATE));

    let skipped: Vec<(&str, &str)> = import
        .skipped
        .iter()
        .map(|s| (s.source.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(
        skipped,
        [
            (
                "security scheme queryKey",
                "only HTTP bearer and basic, and API keys in a header, become credentials (the gateway injects credentials as headers)"
            ),
            (
                "POST /pets/{petId}/photo",
                "the request body is multipart/form-data, not JSON (multipart, form and XML bodies are not supported)"
            ),
            ("GET /session", "cookie parameter `sid` is not supported"),
        ]
    );
    assert_eq!(import.manifest.egress[0].credentials, ["bearerauth"]);
    let binding = &import.grants[0].credentials["bearerauth"];
    assert_eq!(
        (
            binding.env.as_deref(),
            binding.header.as_str(),
            binding.scheme.as_deref()
        ),
        (
            Some("TEST_PETSTORE_BEARERAUTH"),
            "authorization",
            Some("Bearer")
        )
    );
    assert_eq!(import.grants[0].headers, ["x-trace".to_owned()].into());
    assert_eq!(import.grants[0].url.to_string(), "http://127.0.0.1:8080/v1");
}

#[test]
fn yaml_31_and_a_server_override() {
    let yaml = "openapi: 3.1.0\ninfo: { title: t, version: '1' }\nservers: [{ url: /relative }]\npaths:\n  /items/{id}:\n    get:\n      operationId: getItem\n      parameters:\n        - { name: id, in: path, required: true, schema: { type: [string, 'null'] } }\n";
    assert_eq!(
        error(yaml),
        "the spec: server URL `/relative` is not an absolute http(s) URL; pass --server https://host/base"
    );
    let import = import(yaml, Some("https://api.example.com/"), &options()).unwrap();
    let item = &import.manifest.capabilities[0];
    assert_eq!(
        item.upstream.as_ref().unwrap()["url"],
        "https://api.example.com/items/{id}"
    );
    assert_eq!(
        item.input_schema["properties"]["id"]["type"],
        json!(["string", "null"])
    );
}

#[test]
fn refusals_say_what_and_where() {
    assert_eq!(
        error("{\n  \"openapi\": \"3.0.0\",\n  \"paths\": {,}\n}"),
        "the spec is not valid JSON at line 3, column 13: key must be a string at line 3 column 13"
    );
    let yaml_error = error("openapi: 3.1.0\npaths:\n  /a: [unclosed\n");
    assert!(
        yaml_error.starts_with("the spec is not valid YAML at line "),
        "{yaml_error}"
    );
    assert_eq!(
        error(r#"{"swagger": "2.0", "paths": {}}"#),
        "the spec: this is Swagger 2.0, not OpenAPI 3; convert it to OpenAPI 3.0 first (for example with swagger2openapi) and import that"
    );
    assert_eq!(
        error(
            r##"{"openapi": "3.1.0", "servers": [{"url": "http://h"}], "paths": {"/a": {"get": {"parameters": [{"$ref": "#/components/parameters/Missing"}]}}}}"##
        ),
        "the spec: `$ref` `#/components/parameters/Missing` (at /paths/~1a/get) does not resolve to anything in the document"
    );
    assert_eq!(
        error(
            r#"{"openapi": "3.1.0", "servers": [{"url": "http://h"}], "paths": {"/a": {"get": {"operationId": "Get Thing"}}, "/b": {"get": {"operationId": "get.thing"}}}}"#
        ),
        "`Get Thing` and `get.thing` both become capability `get_thing`; leave one out with --exclude, or rename it upstream"
    );
}

#[test]
fn refuses_more_operations_than_one_adapter_may_declare() {
    let paths: Map<String, Value> = (0..5000)
        .map(|i| {
            (
                format!("/r{i}"),
                json!({ "get": { "operationId": format!("op{i}") } }),
            )
        })
        .collect();
    let doc = json!({ "openapi": "3.1.0", "servers": [{ "url": "http://h" }], "paths": paths });
    assert_eq!(
        error(&doc.to_string()),
        "5000 capabilities is more than one adapter may declare (4096); import a part with --include or --exclude"
    );
}

/// What is written is what is signed: the TOML reads back as the same manifest, and the
/// config snippet reads as operator config.
#[test]
fn the_written_files_read_back() {
    let import = import(PETSTORE_30, None, &options()).unwrap();
    let text = crate::import::output::manifest_toml(&import, "petstore.json").unwrap();
    assert_eq!(
        Manifest::from_toml(&text).unwrap(),
        Manifest::Adapter(import.manifest.clone())
    );
    let config =
        crate::ServeConfig::from_toml(&crate::import::output::config_toml(&import)).unwrap();
    assert_eq!(config.host.egress.grants, import.grants.as_slice());
    assert_eq!(
        config.host.pipeline.tools[0].tools.as_str(),
        "test.petstore.*"
    );
}

/// A document whose schemas each refer twice to the one before, `levels` deep, and an
/// operation per entry of `bodies` whose JSON body is that schema.
fn fan_out(levels: usize, bodies: &[usize]) -> String {
    let schemas = refs::fan_out(levels);
    let paths: Map<String, Value> = bodies
        .iter()
        .enumerate()
        .map(|(n, level)| {
            let body = json!({ "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/S{level}") } } } });
            (
                format!("/things/{n}"),
                json!({ "post": { "operationId": format!("make{n}"), "requestBody": body } }),
            )
        })
        .collect();
    json!({ "openapi": "3.1.0", "servers": [{ "url": "http://h" }], "components": { "schemas": schemas }, "paths": paths })
        .to_string()
}

/// Each schema referring twice to the one before doubles the inlined size per level: the
/// import stops at the budget, naming the schema and the operation, instead of running out of
/// memory (a 4 KB document of this shape took an import to 2.9 GB).
#[test]
fn a_ref_fan_out_is_refused_naming_the_schema() {
    let doc = fan_out(64, &[63]);
    assert!(
        doc.len() < 8 * 1024,
        "a small document: {} bytes",
        doc.len()
    );
    assert_eq!(
        error(&doc),
        "the spec: the schema `#/components/schemas/S63` (at /paths/~1things~10/post) expands to \
         more than 100000 JSON values once its `$ref`s are inlined (schemas that refer to one \
         another several times over multiply); leave the operation out with --exclude 'make0', \
         or make the document refer to it fewer times"
    );
    // Under the bound per operation, but not together: 34 operations of S13 (57,343 values
    // each) fit in the import's budget, and the 35th in the document's order, `/things/34`,
    // does not.
    let per_operation = fan_out(14, &[13; 40]);
    let many = import(&fan_out(14, &[13; 3]), None, &options()).unwrap();
    assert_eq!(many.manifest.capabilities.len(), 3);
    assert_eq!(
        error(&per_operation),
        "the spec: the schema `#/components/schemas/S13` (at /paths/~1things~134/post) takes \
         the import's input schemas past 2000000 JSON values once their `$ref`s are inlined; \
         import fewer operations with --include or --exclude"
    );
}
