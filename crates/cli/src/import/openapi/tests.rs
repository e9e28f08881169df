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

/// Each schema referring twice to the one before doubles the inlined size per level: past the
/// bound, the operation keeps each schema once in its input schema's `$defs` (a 6 KB document
/// of this shape used to be refused, and before that took an import to 2.9 GB), and the table
/// says so.
#[test]
fn a_ref_fan_out_keeps_its_schemas_shared() {
    let doc = fan_out(64, &[63]);
    assert!(
        doc.len() < 8 * 1024,
        "a small document: {} bytes",
        doc.len()
    );
    let shared = import(&doc, None, &options()).unwrap();
    let schema = &shared.manifest.capabilities[0].input_schema;
    assert_eq!(
        schema["properties"]["body"],
        json!({ "$ref": "#/$defs/S63" })
    );
    let defs = schema["$defs"].as_object().unwrap();
    assert_eq!(defs.len(), 64);
    assert_eq!(
        defs["S1"],
        json!({ "type": "object", "properties": { "a": { "$ref": "#/$defs/S0" }, "b": { "$ref": "#/$defs/S0" } } })
    );
    assert_eq!(defs["S0"], json!({ "type": "string" }));
    Manifest::Adapter(shared.manifest.clone())
        .validate()
        .unwrap();
    let table = crate::import::output::table(&shared);
    assert!(
        table.contains(
            "note: POST /things/0: its input schema keeps the 64 component schemas it uses in \
             `$defs`, once each"
        ),
        "{table}"
    );
    // Under the bound, a schema is inlined as before.
    let small = import(&fan_out(4, &[3]), None, &options()).unwrap();
    let body = &small.manifest.capabilities[0].input_schema["properties"]["body"];
    assert_eq!(body["properties"]["a"]["properties"]["b"]["type"], "object");
    assert!(
        small.manifest.capabilities[0]
            .input_schema
            .get("$defs")
            .is_none()
    );
}

/// A schema too large even kept once (an `enum` of more values than the bound) is refused
/// naming it and the operation; so is an import whose operations share one schema of 99,994
/// values more times than the import's bound holds (the 21st, `/things/20`).
#[test]
fn a_schema_past_the_bound_even_shared_is_refused_naming_it() {
    let document = |values: usize, operations: usize| {
        let big = json!({ "type": "string", "enum": (0..values).map(|i| i.to_string()).collect::<Vec<_>>() });
        let paths: Map<String, Value> = (0..operations)
            .map(|n| {
                let body = json!({ "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Big" } } } });
                (format!("/things/{n}"), json!({ "post": { "operationId": format!("make{n}"), "requestBody": body } }))
            })
            .collect();
        json!({ "openapi": "3.1.0", "servers": [{ "url": "http://h" }],
                "components": { "schemas": { "Big": big } }, "paths": paths })
        .to_string()
    };
    assert_eq!(
        error(&document(100_000, 1)),
        "the spec: the schema `#/components/schemas/Big` (at /paths/~1things~10/post) expands \
         to more than 100000 JSON values, even with each component schema it uses kept once in \
         `$defs`; leave the operation out with --exclude 'make0'"
    );
    assert_eq!(
        error(&document(99_990, 21)),
        "the spec: the schema `#/components/schemas/Big` (at /paths/~1things~120/post) takes \
         the import's input schemas past 2000000 JSON values; import fewer operations with \
         --include or --exclude"
    );
    assert_eq!(
        import(&document(99_990, 20), None, &options())
            .unwrap()
            .manifest
            .capabilities
            .len(),
        20
    );
}

/// A document of one operation, `GET /a` (`getA`) with `parameters`, served at `server`.
fn one_get(server: &str, parameters: &Value) -> String {
    json!({ "openapi": "3.0.3", "servers": [{ "url": server }],
            "paths": { "/a": { "get": { "operationId": "getA", "parameters": parameters } } } })
    .to_string()
}

/// A scheme-relative server (`//host/base`, relative to wherever the document was served from)
/// is taken as https, and the table says so and how to choose http.
#[test]
fn a_scheme_relative_server_is_https_noted() {
    let import = import(
        &one_get("//api.example.com/v1", &json!([])),
        None,
        &options(),
    )
    .unwrap();
    assert_eq!(
        import.manifest.capabilities[0].upstream.as_ref().unwrap()["url"],
        "https://api.example.com/v1/a"
    );
    assert_eq!(
        import.grants[0].url.to_string(),
        "https://api.example.com:443/v1"
    );
    let table = crate::import::output::table(&import);
    assert!(
        table.contains(
            "note: server `//api.example.com/v1` names no scheme: https is assumed; pass \
             --server http://api.example.com/v1 for plain http"
        ),
        "{table}"
    );
}

/// A pattern anchored the Ruby way (`\A…\z`) is written as ECMA-262's `^…$`, one JSON Schema
/// cannot compile at all is dropped; the table says which, and the operation is imported.
#[test]
fn a_pattern_in_another_dialect_is_translated_or_dropped_noted() {
    let parameters = json!([
        { "name": "slug", "in": "query", "schema": { "type": "string", "pattern": "\\A[a-z0-9-]+\\z" } },
        { "name": "code", "in": "query", "schema": { "type": "string", "pattern": "\\A[A-Z]{3}\\Z" } },
        { "name": "odd", "in": "query", "schema": { "type": "string", "pattern": "(?<=x" } },
    ]);
    let import = import(&one_get("https://h", &parameters), None, &options()).unwrap();
    let schema = &import.manifest.capabilities[0].input_schema;
    assert_eq!(schema["properties"]["slug"]["pattern"], "^[a-z0-9-]+$");
    assert_eq!(schema["properties"]["code"]["pattern"], "^[A-Z]{3}$");
    assert_eq!(schema["properties"]["odd"], json!({ "type": "string" }));
    let table = crate::import::output::table(&import);
    for note in [
        "note: GET /a: pattern `\\A[a-z0-9-]+\\z` at /properties/slug/pattern written as `^[a-z0-9-]+$`",
        "note: GET /a: pattern `(?<=x` at /properties/odd/pattern dropped",
    ] {
        assert!(table.contains(note), "{note}\n{table}");
    }
}

/// A `$ref` is a JSON pointer in a URI fragment: `~1` for `/` and percent-encoding (`%7B`,
/// `%20`) both resolve, in a parameter, a path item's operation and a schema.
#[test]
fn escaped_refs_resolve() {
    let doc = json!({
        "openapi": "3.1.0", "servers": [{ "url": "https://h" }],
        "components": { "schemas": {
            "a/b": { "type": "integer" },
            "Pet Owner": { "type": "object", "properties": { "n": { "$ref": "#/components/schemas/a~1b" } } },
        } },
        "paths": {
            "/pets/{id}": { "get": { "operationId": "getPet", "parameters": [
                { "name": "id", "in": "path", "required": true, "schema": { "type": "string" } } ] } },
            "/owners/{id}": { "put": { "operationId": "putOwner",
                "parameters": [{ "$ref": "#/paths/~1pets~1%7Bid%7D/get/parameters/0" }],
                "requestBody": { "content": { "application/json": {
                    "schema": { "$ref": "#/components/schemas/Pet%20Owner" } } } } } },
        },
    });
    let import = import(&doc.to_string(), None, &options()).unwrap();
    let put = import.manifest.capability("putowner").unwrap();
    assert_eq!(
        put.input_schema["properties"]["id"],
        json!({ "type": "string" })
    );
    assert_eq!(
        put.input_schema["properties"]["body"],
        json!({ "type": "object", "properties": { "n": { "type": "integer" } } })
    );
    assert_eq!(
        error(
            r##"{"openapi": "3.1.0", "servers": [{"url": "http://h"}], "paths": {"/a": {"get": {"parameters": [{"$ref": "#/components/parameters/bad%zz"}]}}}}"##
        ),
        "the spec: `$ref` `#/components/parameters/bad%zz` (at /paths/~1a/get) does not resolve to anything in the document"
    );
}

/// An operation whose input schema the host cannot compile (Swagger 2.0's `type: file` left
/// in a 3.0 document) is skipped saying where and why; the rest of the document is imported.
#[test]
fn an_operation_whose_schema_does_not_compile_is_skipped_saying_why() {
    let doc = json!({
        "openapi": "3.0.3", "servers": [{ "url": "https://h" }],
        "paths": {
            "/upload": { "post": { "operationId": "upload", "requestBody": { "content": {
                "application/json": { "schema": { "type": "object",
                    "properties": { "data": { "type": "file" } } } } } } } },
            "/a": { "get": { "operationId": "getA" } },
        },
    });
    let import = import(&doc.to_string(), None, &options()).unwrap();
    assert_eq!(import.manifest.capabilities.len(), 1);
    assert_eq!(import.manifest.capabilities[0].id, "geta");
    assert_eq!(
        import.skipped[0].source, "POST /upload",
        "{:?}",
        import.skipped
    );
    assert!(
        import.skipped[0].reason.starts_with(
            "its input schema is not a valid JSON Schema (2020-12): at \
             `/properties/body/properties/data/type`, `file` is not a type (one of string, \
             number, integer, boolean, object, array, null); correct the document to import it"
        ),
        "{}",
        import.skipped[0].reason
    );
}
