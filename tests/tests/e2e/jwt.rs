//! Bearer JWTs over real loopback HTTP: `McpServer` with `[mcp.jwt] jwks_url` pointing at a
//! loopback JWKS server, tokens signed in the test with generated P-256 keys. Proves the
//! protected resource metadata (RFC 9728), the exact 401 challenges, that the token's tenant
//! and principal reach the call (tool visibility and the audit record), key rotation by `kid`,
//! and that the caller's token never reaches an upstream.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use bytes::Bytes;
use gatehouse_host::Host;
use gatehouse_host::config::EgressConfig;
use gatehouse_server::mcp::{JwtConfig, McpConfig, McpServer};
use gatehouse_tests::artifacts::{ECHO, EGRESS_PROBE};
use gatehouse_tests::grant;
use gatehouse_tests::upstream::Upstream;
use http_body_util::{BodyExt, Empty, Full};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use wasmtime_wasi_http::io::TokioIo;

const ISS: &str = "https://idp.test/";

/// A P-256 signing key and its public JWK.
struct Key {
    kid: String,
    encoding: EncodingKey,
    jwk: Value,
}

fn key(kid: &str) -> Key {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let point = pair.public_key_raw();
    Key {
        kid: kid.to_owned(),
        encoding: EncodingKey::from_ec_der(&pair.serialize_der()),
        jwk: json!({ "kty": "EC", "crv": "P-256", "kid": kid, "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..]) }),
    }
}

fn token(key: &Key, audience: &str, tenant: &str, exp_in: i64) -> String {
    let now = i64::try_from(jsonwebtoken::get_current_timestamp()).unwrap();
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(key.kid.clone());
    let claims = json!({ "iss": ISS, "aud": audience, "sub": format!("user:{tenant}-1"), "tenant": tenant, "exp": now + exp_in });
    jsonwebtoken::encode(&header, &claims, &key.encoding).unwrap()
}

/// A loopback HTTP server answering every GET with the current JWKS, counting requests.
async fn jwks_server(jwks: Arc<Mutex<Value>>, hits: Arc<Mutex<usize>>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (jwks, hits) = (Arc::clone(&jwks), Arc::clone(&hits));
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_request| {
                    *hits.lock().unwrap() += 1;
                    let body = jwks.lock().unwrap().to_string();
                    async move {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                            Bytes::from(body),
                        )))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    port
}

/// One HTTP request to the gateway: status, headers, body.
async fn request(
    port: u16,
    method: &str,
    path: &str,
    bearer: Option<&str>,
) -> (u16, hyper::HeaderMap, String) {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", format!("127.0.0.1:{port}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(token) = bearer {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let body = if method == "POST" {
        Full::new(Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        ))
        .boxed()
    } else {
        Empty::new().boxed()
    };
    let response = sender
        .send_request(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

/// A `tools/call` of `name` with `arguments` as `token`'s caller: the JSON-RPC result.
async fn call(port: u16, token: &str, name: &str, arguments: Value) -> Value {
    let bearer = format!("Bearer {token}");
    gatehouse_tests::mcp::call(
        port,
        &[("authorization", bearer.as_str())],
        name,
        arguments,
        Value::Null,
    )
    .await
}

fn tool_names(body: &str) -> Vec<String> {
    let value: Value = serde_json::from_str(body).unwrap();
    value["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwts_from_a_jwks_url_identify_callers_and_rotate_by_kid() {
    let upstream = Upstream::start().await;
    let (first, second) = (key("k1"), key("k2"));
    let jwks = Arc::new(Mutex::new(json!({ "keys": [first.jwk.clone()] })));
    let hits = Arc::new(Mutex::new(0));
    let jwks_port = jwks_server(Arc::clone(&jwks), Arc::clone(&hits)).await;

    let mut config = gatehouse_tests::config(&["gatehouse.*", "test.*"], &[]);
    config.pipeline.tools = vec![
        grant("*", &["acme"]),
        grant("gatehouse.echo.*", &["globex"]),
    ];
    config.egress = serde_json::from_value::<EgressConfig>(json!({
        "grant": [{ "adapter": "test.egress-probe", "url": upstream.url("/"), "methods": ["GET"], "allow_private": ["127.0.0.0/8"] }],
    }))
    .unwrap();
    let host = Arc::new(Host::new(config).unwrap());
    for plugin in [ECHO, EGRESS_PROBE] {
        host.install_adapter(&plugin.signed()).unwrap();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let jwt: JwtConfig = serde_json::from_value(json!({
        "issuer": ISS,
        "audience": audience,
        "algorithms": ["ES256"],
        "jwks_url": format!("http://127.0.0.1:{jwks_port}/jwks.json"),
    }))
    .unwrap();
    let mcp = McpConfig {
        jwt: Some(jwt),
        public_url: Some(format!("http://127.0.0.1:{port}")),
        authorization_servers: vec![ISS.to_owned()],
        scopes_supported: vec!["tools".to_owned()],
        ..McpConfig::default()
    };
    let server = McpServer::new(host, &mcp).unwrap();
    server.refresh_keys().await.unwrap();
    assert_eq!(*hits.lock().unwrap(), 1, "fetched at start");
    tokio::spawn(server.serve(listener, std::future::pending()));

    // RFC 9728: the metadata, at the bare and the path-suffixed well-known URL, without identity.
    let expected = json!({
        "resource": audience,
        "authorization_servers": [ISS],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["tools"],
    });
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let (status, _, body) = request(port, "GET", path, None).await;
        assert_eq!(
            (status, serde_json::from_str::<Value>(&body).unwrap()),
            (200, expected.clone()),
            "{path}"
        );
    }
    let (status, headers, _) =
        request(port, "POST", "/.well-known/oauth-protected-resource", None).await;
    assert_eq!((status, headers["allow"].to_str().unwrap()), (405, "GET"));

    // 401s carry the challenge; with a refused token also `invalid_token`.
    let metadata = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
    let (status, headers, body) = request(port, "POST", "/mcp", None).await;
    assert_eq!(status, 401);
    assert_eq!(
        headers["www-authenticate"].to_str().unwrap(),
        format!("Bearer resource_metadata=\"{metadata}\"")
    );
    assert!(body.contains("IDENTITY_INVALID"), "{body}");
    let refused = format!("Bearer resource_metadata=\"{metadata}\", error=\"invalid_token\"");
    for (bad, message) in [
        (
            token(&first, &audience, "acme", -600),
            "the token is not valid: the token has expired (`exp`)",
        ),
        (
            token(&first, "https://other.test/mcp", "acme", 600),
            "the token is not valid: the audience (`aud`) is not this gateway",
        ),
        (
            token(&second, &audience, "acme", 600),
            "no key of this gateway matches the token (kid `k2`)",
        ),
    ] {
        let (status, headers, body) = request(port, "POST", "/mcp", Some(&bad)).await;
        assert_eq!(
            (status, headers["www-authenticate"].to_str().unwrap()),
            (401, refused.as_str()),
            "{body}"
        );
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["message"],
            message
        );
    }

    // The token's tenant decides what is visible and what runs.
    let acme = token(&first, &audience, "acme", 600);
    let globex = token(&first, &audience, "globex", 600);
    let (status, _, body) = request(port, "POST", "/mcp", Some(&acme)).await;
    assert_eq!(status, 200);
    assert!(
        tool_names(&body)
            .iter()
            .any(|n| n == "test.egress-probe.read"),
        "{body}"
    );
    let (_, _, body) = request(port, "POST", "/mcp", Some(&globex)).await;
    let names = tool_names(&body);
    assert!(
        !names.is_empty() && names.iter().all(|n| n.starts_with("gatehouse.echo.")),
        "{names:?}"
    );

    // The call runs for the token's tenant, and its egress carries no caller Authorization.
    let probe = call(
        port,
        &acme,
        "test.egress-probe.read",
        json!({ "requests": [{ "method": "GET", "url": upstream.url("/seen") }] }),
    )
    .await;
    assert_eq!(
        probe["_meta"]["gatehouse/result"]["outcome"], "OK",
        "{probe}"
    );
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].headers.get("authorization").is_none(),
        "{:?}",
        seen[0].headers
    );
    assert!(!format!("{:?}", seen[0]).contains(&acme));

    // Rotation: the IdP publishes k2 (and drops k1); a k2 token makes the gateway fetch again.
    *jwks.lock().unwrap() = json!({ "keys": [second.jwk.clone()] });
    tokio::time::sleep(gatehouse_server::mcp::jwt::MIN_REFETCH).await;
    let fetched = *hits.lock().unwrap();
    let rotated = token(&second, &audience, "globex", 600);
    let (status, _, body) = request(port, "POST", "/mcp", Some(&rotated)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(*hits.lock().unwrap(), fetched + 1);
    let (status, _, body) = request(port, "POST", "/mcp", Some(&acme)).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["message"],
        "no key of this gateway matches the token (kid `k1`)"
    );
}
