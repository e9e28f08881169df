//! The HTTP request of one call: the mapping's URL template filled from the arguments.

use gatehouse_sdk::ToolError;
use gatehouse_sdk::http::Request;
use gatehouse_sdk::serde_json::Value;

use crate::mapping::{Location, Mapping};

/// The request for `args` (already checked against the input schema by the host).
pub fn build(mapping: &Mapping, args: &Value) -> Result<Request, ToolError> {
    let mut url = mapping.url.clone();
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
                url = url.replace(&format!("{{{}}}", parameter.name), &encode(&text));
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
                headers.push((parameter.name.clone(), scalar(&parameter.argument, value)?))
            }
        }
    }
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
    use crate::mapping::Parameter;

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
            &json!({ "petId": "a b/c", "tags": ["cat", "dog"], "fields": ["id", "name"], "x-trace": 7 }),
        )
        .unwrap();
        let expected = Request::new(
            "GET",
            "http://127.0.0.1:1/v1/pets/a%20b%2Fc?tags=cat&tags=dog&fields=id%2Cname",
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
}
