//! The HTTP request of one call: the mapping's URL template filled from the arguments.
//!
//! A path parameter fills one segment of the template and stays there: its value is
//! percent-encoded (everything but RFC 3986's unreserved characters), and a value that no
//! encoding keeps inside its segment is refused as `INVALID_ARGUMENTS` naming the argument,
//! before anything is sent. That is a segment left empty, `.` or `..` (URL parsers, the egress
//! gate's included, resolve those, so `GET /pets/{petId}/photos` with `petId = ".."` would
//! reach `GET /photos`, another operation), and a value holding `/`, `\`, `%`, `;` or a control
//! character (the egress gate refuses their encodings, `%2F`, `%5C`, `%25`, `%3B`, `%00`...,
//! as ambiguous to upstream servers, so the call would fail later as `EGRESS_DENIED`).

use gatehouse_sdk::ToolError;
use gatehouse_sdk::http::Request;
use gatehouse_sdk::serde_json::Value;

use crate::mapping::{Location, Mapping, Parameter};

/// The request for `args` (already checked against the input schema by the host).
pub fn build(mapping: &Mapping, args: &Value) -> Result<Request, ToolError> {
    let mut path_values = Vec::new();
    let mut query = Vec::new();
    let mut headers = Vec::new();
    for parameter in &mapping.parameters {
        let Some(value) = args.get(&parameter.argument).filter(|v| !v.is_null()) else {
            if parameter.location == Location::Path {
                return Err(missing(&parameter.argument));
            }
            continue;
        };
        match parameter.location {
            Location::Path => {
                let text = scalar(&parameter.argument, value)?;
                path_values.push((parameter, in_one_segment(&parameter.argument, &text)?));
            }
            Location::Query => match value {
                Value::Array(items) => {
                    let items = items
                        .iter()
                        .map(|item| scalar(&parameter.argument, item))
                        .collect::<Result<Vec<_>, _>>()?;
                    if parameter.explode {
                        query.extend(
                            items
                                .iter()
                                .map(|item| (parameter.name.clone(), item.clone())),
                        );
                    } else {
                        query.push((parameter.name.clone(), items.join(",")));
                    }
                }
                other => query.push((parameter.name.clone(), scalar(&parameter.argument, other)?)),
            },
            Location::Header => {
                headers.push((parameter.name.clone(), scalar(&parameter.argument, value)?));
            }
        }
    }
    let mut url = fill_template(&mapping.url, &path_values)?;
    if !query.is_empty() {
        let pairs: Vec<String> = query
            .iter()
            .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
            .collect();
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(&pairs.join("&"));
    }
    let mut request = Request::new(&mapping.method, url).header("accept", "application/json");
    for (name, value) in headers {
        request = request.header(name, value);
    }
    if mapping.body
        && let Some(body) = args.get("body")
    {
        request = request.json(body)?;
    }
    Ok(request)
}

fn missing(argument: &str) -> ToolError {
    ToolError::validation("INVALID_ARGUMENTS", format!("`{argument}` is required"))
}

/// A string, number or boolean as text; anything else is not a parameter value.
fn scalar(argument: &str, value: &Value) -> Result<String, ToolError> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(ToolError::validation(
            "INVALID_ARGUMENTS",
            format!("`{argument}` must be a string, number or boolean (or a list of them)"),
        )),
    }
}

/// `text` percent-encoded for a path segment, or `INVALID_ARGUMENTS` when it holds a
/// character no encoding keeps inside one segment past the egress gate.
fn in_one_segment(argument: &str, text: &str) -> Result<String, ToolError> {
    let refused = text.chars().find_map(|c| match c {
        '/' => Some("`/`".to_owned()),
        '\\' => Some("`\\`".to_owned()),
        '%' => Some("`%`".to_owned()),
        ';' => Some("`;`".to_owned()),
        c if c.is_control() => Some(format!("the control character U+{:04X}", u32::from(c))),
        _ => None,
    });
    match refused {
        Some(what) => Err(not_one_segment(
            argument,
            &format!("it holds {what}, which the path cannot carry inside one segment"),
        )),
        None => Ok(encode(text)),
    }
}

/// `url` (a template) with each `{name}` replaced by its encoded value, segment by segment: a
/// segment that held a parameter and is left empty, `.` or `..` is refused (URL parsers
/// remove or resolve it, so the request would name another path).
fn fill_template(url: &str, values: &[(&Parameter, String)]) -> Result<String, ToolError> {
    // The path starts at the first `/` after the scheme's `//`.
    let path_start = url
        .find("://")
        .and_then(|scheme| url[scheme + 3..].find('/').map(|i| scheme + 3 + i))
        .unwrap_or(url.len());
    let mut out = url[..path_start].to_owned();
    for (i, segment) in url[path_start..].split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        let mut filled = segment.to_owned();
        let mut held = Vec::new();
        for (parameter, value) in values {
            let placeholder = format!("{{{}}}", parameter.name);
            if filled.contains(&placeholder) {
                filled = filled.replace(&placeholder, value);
                held.push(parameter.argument.as_str());
            }
        }
        if let Some(argument) = held.first()
            && matches!(filled.as_str(), "" | "." | "..")
        {
            let what = if filled.is_empty() {
                "it leaves its path segment empty".to_owned()
            } else {
                format!("it makes its path segment `{filled}`, which would name another path")
            };
            return Err(not_one_segment(argument, &what));
        }
        out.push_str(&filled);
    }
    Ok(out)
}

fn not_one_segment(argument: &str, why: &str) -> ToolError {
    ToolError::validation(
        "INVALID_ARGUMENTS",
        format!("path parameter `{argument}` must stay one segment of the URL path: {why}"),
    )
    .with_remediation(format!(
        "pass `{argument}` as the identifier itself, not a path: no `/`, `\\`, `%`, `;` or \
         control characters, and not `.`, `..` or empty"
    ))
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use gatehouse_sdk::serde_json::json;

    use super::*;

    fn parameter(name: &str, location: Location, explode: bool) -> Parameter {
        Parameter {
            name: name.into(),
            location,
            argument: name.into(),
            explode,
        }
    }

    #[test]
    fn fills_path_query_and_headers() {
        let mapping = Mapping {
            method: "GET".into(),
            url: "http://127.0.0.1:1/v1/pets/{petId}".into(),
            parameters: vec![
                parameter("petId", Location::Path, true),
                parameter("tags", Location::Query, true),
                parameter("fields", Location::Query, false),
                parameter("x-trace", Location::Header, true),
            ],
            body: false,
        };
        let request = build(
            &mapping,
            &json!({ "petId": "a b?c#d", "tags": ["cat", "dog"], "fields": ["id", "name"], "x-trace": 7 }),
        )
        .unwrap();
        let expected = Request::new(
            "GET",
            "http://127.0.0.1:1/v1/pets/a%20b%3Fc%23d?tags=cat&tags=dog&fields=id%2Cname",
        )
        .header("accept", "application/json")
        .header("x-trace", "7");
        assert_eq!(request, expected);
    }

    #[test]
    fn sends_the_body_argument_as_json() {
        let mapping = Mapping {
            method: "POST".into(),
            url: "http://127.0.0.1:1/v1/pets".into(),
            parameters: Vec::new(),
            body: true,
        };
        let request = build(&mapping, &json!({ "body": { "name": "Rex" } })).unwrap();
        let expected = Request::post("http://127.0.0.1:1/v1/pets")
            .header("accept", "application/json")
            .json(&json!({ "name": "Rex" }))
            .unwrap();
        assert_eq!(request, expected);
    }

    #[test]
    fn refuses_a_missing_path_parameter_and_an_object_value() {
        let mapping = Mapping {
            method: "GET".into(),
            url: "http://h/pets/{petId}".into(),
            parameters: vec![parameter("petId", Location::Path, true)],
            body: false,
        };
        assert_eq!(
            build(&mapping, &json!({})).unwrap_err().message,
            "`petId` is required"
        );
        assert_eq!(
            build(&mapping, &json!({ "petId": {} }))
                .unwrap_err()
                .message,
            "`petId` must be a string, number or boolean (or a list of them)"
        );
    }

    fn photos(args: &Value) -> Result<Request, ToolError> {
        let mapping = Mapping {
            method: "GET".into(),
            url: "http://h:8080/v1/pets/{petId}/photos/{file}.{ext}".into(),
            parameters: vec![
                parameter("petId", Location::Path, true),
                parameter("file", Location::Path, true),
                parameter("ext", Location::Path, true),
            ],
            body: false,
        };
        build(&mapping, args)
    }

    #[test]
    fn accepts_path_values_that_stay_one_segment() {
        for (pet, file, ext, path) in [
            ("7", "a", "png", "/v1/pets/7/photos/a.png"),
            ("...", "a", "png", "/v1/pets/.../photos/a.png"),
            (".a", ".", "png", "/v1/pets/.a/photos/..png"),
            ("x y", "é", "~", "/v1/pets/x%20y/photos/%C3%A9.~"),
            (
                "a?b#c&d=e",
                "f",
                "g",
                "/v1/pets/a%3Fb%23c%26d%3De/photos/f.g",
            ),
        ] {
            let request = photos(&json!({ "petId": pet, "file": file, "ext": ext })).unwrap();
            let expected =
                Request::get(format!("http://h:8080{path}")).header("accept", "application/json");
            assert_eq!(request, expected, "{pet:?} {file:?} {ext:?}");
        }
    }

    #[test]
    fn rejects_path_values_that_leave_their_segment() {
        let segment = "must stay one segment of the URL path";
        for (pet, argument, why) in [
            (
                "..",
                "petId",
                "it makes its path segment `..`, which would name another path",
            ),
            (
                ".",
                "petId",
                "it makes its path segment `.`, which would name another path",
            ),
            ("", "petId", "it leaves its path segment empty"),
            (
                "a/b",
                "petId",
                "it holds `/`, which the path cannot carry inside one segment",
            ),
            (
                "../admin",
                "petId",
                "it holds `/`, which the path cannot carry inside one segment",
            ),
            (
                "a\\b",
                "petId",
                "it holds `\\`, which the path cannot carry inside one segment",
            ),
            (
                "%2e%2e",
                "petId",
                "it holds `%`, which the path cannot carry inside one segment",
            ),
            (
                "100%",
                "petId",
                "it holds `%`, which the path cannot carry inside one segment",
            ),
            (
                "a;b",
                "petId",
                "it holds `;`, which the path cannot carry inside one segment",
            ),
            (
                "a\nb",
                "petId",
                "it holds the control character U+000A, which the path cannot carry inside one segment",
            ),
        ] {
            let err = photos(&json!({ "petId": pet, "file": "a", "ext": "png" })).unwrap_err();
            assert_eq!(
                (err.code.as_str(), err.message.as_str()),
                (
                    "INVALID_ARGUMENTS",
                    format!("path parameter `{argument}` {segment}: {why}").as_str()
                ),
                "{pet:?}"
            );
        }
        // Two parameters that together make a dot segment.
        let mapping = Mapping {
            method: "GET".into(),
            url: "http://h/pets/{a}{b}/photos".into(),
            parameters: vec![
                parameter("a", Location::Path, true),
                parameter("b", Location::Path, true),
            ],
            body: false,
        };
        let err = build(&mapping, &json!({ "a": ".", "b": "." })).unwrap_err();
        assert_eq!(
            err.message,
            format!(
                "path parameter `a` {segment}: it makes its path segment `..`, which would name another path"
            )
        );
    }
}
