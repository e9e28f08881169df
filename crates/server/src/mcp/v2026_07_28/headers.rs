//! SEP-2243: the standard headers of a 2026-07-28 request must agree with its body, so that
//! what a load balancer or a firewall routes on is what the gateway runs. A disagreement is
//! -32020 (HTTP 400), and nothing runs:
//! - `Mcp-Method`: present, once, exactly the body's `method` (values are case-sensitive);
//! - `Mcp-Name`: present, once, for the methods that name something, equal to `params.name`
//!   (`tools/call`, `prompts/get`), `params.uri` (`resources/read`, `resources/subscribe`,
//!   `resources/unsubscribe`) or `params.taskId` (`tasks/get`, `tasks/update`, `tasks/cancel`);
//! - `Mcp-Param-<Header>` on `tools/call`: for each argument the tool's input schema annotates
//!   with `"x-mcp-header": "<Header>"` (along `properties` from the schema's root), the header
//!   is present exactly when the argument is (a string, number or boolean), and equal to it.
//!
//! A header value may be Base64 in the form `=?base64?<text>?=` (for a value a header cannot
//! carry as it is); a value in that form that does not decode is a disagreement. Only the
//! first form is special: a value that merely starts or ends like it is taken literally.
//! Surrounding whitespace is not part of a value (RFC 9110 OWS: the HTTP parser drops it).

use base64::Engine;
use base64::prelude::BASE64_STANDARD;
use http::HeaderMap;
use serde_json::Value;

use crate::mcp::message::{Params, Request};

/// The prefix and suffix of a Base64 header value.
const BASE64: (&str, &str) = ("=?base64?", "?=");

/// Checks `request`'s headers against its body; `schema` gives a called tool's input schema as
/// the caller sees it. `Err`: why they disagree.
pub fn check(
    headers: &HeaderMap,
    request: &Request,
    schema: impl Fn(&str) -> Option<Value>,
) -> Result<(), String> {
    let version = headers
        .get("mcp-protocol-version")
        .and_then(|value| value.to_str().ok());
    if version.is_none_or(|version| version < "2026-07-28") {
        return Ok(());
    }
    let method = request.method.as_str();
    match one(headers, "mcp-method")? {
        None => return Err("missing required Mcp-Method header".to_owned()),
        Some(value) if value != method => {
            return Err(format!(
                "the Mcp-Method header `{value}` does not match the body's method `{method}`"
            ));
        }
        Some(_) => {}
    }
    let (name, arguments) = match &request.params {
        Params::Call(call) => (
            Some(call.params.name.to_string()),
            call.params.arguments.clone().map(Value::Object),
        ),
        Params::Other(params) => {
            let key = match method {
                "prompts/get" => Some("name"),
                "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
                "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
                _ => None,
            };
            let name = key
                .and_then(|key| params.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned);
            (name, None)
        }
    };
    if let Some(expected) = &name {
        let Some(raw) = one(headers, "mcp-name")? else {
            return Err(format!("missing required Mcp-Name header for `{method}`"));
        };
        let given = decode(raw).ok_or("the Mcp-Name header is not valid Base64")?;
        if &given != expected {
            return Err(format!(
                "the Mcp-Name header `{given}` does not match the body's `{expected}`"
            ));
        }
    }
    if let (Params::Call(_), Some(tool)) = (&request.params, &name)
        && let Some(schema) = schema(tool)
    {
        let arguments = arguments.unwrap_or(Value::Null);
        for (path, header) in annotated(&schema) {
            params_match(headers, &arguments, &path, &header)?;
        }
    }
    Ok(())
}

/// One annotated argument's header against its value.
fn params_match(
    headers: &HeaderMap,
    arguments: &Value,
    path: &[String],
    header: &str,
) -> Result<(), String> {
    let name = format!("Mcp-Param-{header}");
    let argument = path.join(".");
    let value = path
        .iter()
        .try_fold(arguments, |value, key| value.get(key))
        .and_then(|value| match value {
            Value::String(text) => Some(text.clone()),
            Value::Bool(flag) => Some(flag.to_string()),
            Value::Number(number) => Some(number.to_string()),
            _ => None,
        });
    match (one(headers, &name)?, value) {
        (None, None) => Ok(()),
        (Some(_), None) => Err(format!(
            "the {name} header is sent, but the argument `{argument}` is not"
        )),
        (None, Some(_)) => Err(format!(
            "missing the {name} header for the argument `{argument}`"
        )),
        (Some(raw), Some(expected)) => {
            let given =
                decode(raw).ok_or_else(|| format!("the {name} header is not valid Base64"))?;
            if given == expected {
                Ok(())
            } else {
                Err(format!(
                    "the {name} header `{given}` does not match the argument `{argument}` (`{expected}`)"
                ))
            }
        }
    }
}

/// The arguments a schema annotates with `x-mcp-header`, as (path, header name), along
/// `properties` from the root.
fn annotated(schema: &Value) -> Vec<(Vec<String>, String)> {
    fn walk(
        properties: Option<&Value>,
        path: &mut Vec<String>,
        out: &mut Vec<(Vec<String>, String)>,
    ) {
        let Some(Value::Object(properties)) = properties else {
            return;
        };
        for (name, schema) in properties {
            path.push(name.clone());
            if let Some(Value::String(header)) = schema.get("x-mcp-header")
                && !header.is_empty()
            {
                out.push((path.clone(), header.clone()));
            }
            walk(schema.get("properties"), path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(schema.get("properties"), &mut Vec::new(), &mut out);
    out
}

/// The one value of header `name`, if sent; two values, or one that is not text, disagree.
fn one<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, String> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(format!("the {name} header is sent twice"));
    }
    value
        .to_str()
        .map(Some)
        .map_err(|_| format!("the {name} header is not text"))
}

/// A header value, its Base64 form decoded; `None`: that form, not decoding to UTF-8 text.
fn decode(value: &str) -> Option<String> {
    match value
        .strip_prefix(BASE64.0)
        .and_then(|inner| inner.strip_suffix(BASE64.1))
    {
        Some(inner) => String::from_utf8(BASE64_STANDARD.decode(inner).ok()?).ok(),
        None => Some(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::mcp::message::tests::request;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("mcp-protocol-version", "2026-07-28".parse().unwrap());
        for (name, value) in pairs {
            headers.append(
                http::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        headers
    }

    fn schema(_: &str) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": {
                "region": { "type": "string", "x-mcp-header": "Region" },
                "size": { "type": "integer" },
            },
        }))
    }

    fn call(arguments: &Value) -> Request {
        request(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": "deploy", "arguments": arguments },
        }))
    }

    /// (headers, request, accepted?), one case a line.
    #[test]
    fn headers_are_checked_against_the_body() {
        let list = request(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }));
        let get = request(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": { "taskId": "t1" },
        }));
        let hello = json!({ "region": "Hello" });
        type Case<'a> = (Vec<(&'a str, &'a str)>, &'a Request, bool);
        let cases: Vec<Case<'_>> = vec![
            (vec![("mcp-method", "tools/list")], &list, true),
            (vec![("MCP-METHOD", "tools/list")], &list, true),
            (vec![("mcp-method", "TOOLS/LIST")], &list, false),
            (vec![("mcp-method", "prompts/list")], &list, false),
            (vec![], &list, false),
            (
                vec![("mcp-method", "tools/list"), ("mcp-method", "tools/list")],
                &list,
                false,
            ),
            (
                vec![("mcp-method", "tasks/get"), ("mcp-name", "t1")],
                &get,
                true,
            ),
            (
                vec![("mcp-method", "tasks/get"), ("mcp-name", "t2")],
                &get,
                false,
            ),
            (vec![("mcp-method", "tasks/get")], &get, false),
        ];
        for (pairs, request, accepted) in cases {
            assert_eq!(
                check(&headers(&pairs), request, schema).is_ok(),
                accepted,
                "{pairs:?} for {}",
                request.method
            );
        }
        let base = [("mcp-method", "tools/call"), ("mcp-name", "deploy")];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut pairs = base.to_vec();
            pairs.extend_from_slice(extra);
            headers(&pairs)
        };
        let hello_call = call(&hello);
        for (extra, request, accepted) in [
            (vec![("mcp-param-region", "Hello")], &hello_call, true),
            (
                vec![("mcp-param-region", "=?base64?SGVsbG8=?=")],
                &hello_call,
                true,
            ),
            (
                vec![("mcp-param-region", "=?base64?SGVsbG8?=")],
                &hello_call,
                false,
            ),
            (
                vec![("mcp-param-region", "=?base64?SGVs!!!bG8=?=")],
                &hello_call,
                false,
            ),
            (vec![("mcp-param-region", "Bye")], &hello_call, false),
            (vec![], &hello_call, false),
            (
                vec![("mcp-param-region", "SGVsbG8=")],
                &call(&json!({ "region": "SGVsbG8=" })),
                true,
            ),
            (
                vec![("mcp-param-region", "=?base64?SGVsbG8=")],
                &call(&json!({ "region": "=?base64?SGVsbG8=" })),
                true,
            ),
            (
                vec![("mcp-param-region", "x")],
                &call(&json!({ "size": 1 })),
                false,
            ),
            (vec![], &call(&json!({ "size": 1 })), true),
        ] {
            assert_eq!(
                check(&with(&extra), request, schema).is_ok(),
                accepted,
                "{extra:?}"
            );
        }
        // The name may be Base64 too; another tool's name is a disagreement.
        assert!(
            check(
                &headers(&[
                    ("mcp-method", "tools/call"),
                    ("mcp-name", "=?base64?ZGVwbG95?=")
                ]),
                &call(&json!({})),
                |_| None
            )
            .is_ok()
        );
        assert!(
            check(
                &headers(&[("mcp-method", "tools/call"), ("mcp-name", "other")]),
                &call(&json!({})),
                |_| None
            )
            .is_err()
        );
    }

    #[test]
    fn a_request_before_2026_07_28_is_not_held_to_them() {
        let mut old = HeaderMap::new();
        old.insert("mcp-protocol-version", "2025-11-25".parse().unwrap());
        let list = request(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }));
        assert!(check(&old, &list, schema).is_ok());
        assert!(check(&HeaderMap::new(), &list, schema).is_ok());
    }
}
