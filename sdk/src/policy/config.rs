//! Reading the operator's JSON config into a policy's `Config` type.
//!
//! Runs once per call, before `Policy::evaluate`: the host hands the binding's config over as
//! JSON text with every call.

use std::fmt;

use serde::Deserializer;
use serde::de::value::MapDeserializer;
use serde::de::{self, DeserializeOwned, Unexpected, Visitor};
use serde_json::Value;

/// The config rules of [`Policy::Config`](super::Policy::Config). The type's own reading of
/// the text comes first, so its error keeps serde_json's line and column.
pub(super) fn parse<C: DeserializeOwned + Default>(config_json: &str) -> serde_json::Result<C> {
    let config_json = config_json.trim();
    if config_json.is_empty() || config_json == "null" {
        return Ok(C::default());
    }
    serde_json::from_str(config_json).or_else(|e| match serde_json::from_str(config_json) {
        Ok(value) if is_nothing_configured::<C>(&value) => Ok(C::default()),
        _ => Err(e),
    })
}

/// Whether `value`, which `C` does not deserialize from, means "nothing configured" for `C`:
/// `null`, or `{}` when `C` takes no object.
pub(crate) fn is_nothing_configured<C: DeserializeOwned>(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty() && takes_no_object::<C>(),
        _ => false,
    }
}

/// Whether `C` refuses a JSON object for what it is, an object, rather than for what is in
/// it. Deserializes `C` from an empty map whose error type records serde's typed
/// `invalid_type(Unexpected::Map, ..)` call, so no error message is inspected: `()`, unit
/// structs, numbers, strings and sequences refuse a map that way; structs and maps visit it
/// (and may then miss a required field, which is a real config error).
fn takes_no_object<C: DeserializeOwned>() -> bool {
    matches!(C::deserialize(EmptyObject), Err(Refusal::NotAnObject))
}

/// A deserializer that offers every type an empty map.
struct EmptyObject;

impl<'de> Deserializer<'de> for EmptyObject {
    type Error = Refusal;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_map(MapDeserializer::new(std::iter::empty::<((), ())>()))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

/// Why a type refused [`EmptyObject`].
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// It does not take a map at all.
    NotAnObject,
    /// Anything else, e.g. a missing field.
    Other,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refusal::NotAnObject => "not an object",
            Refusal::Other => "refused",
        })
    }
}

impl std::error::Error for Refusal {}

impl de::Error for Refusal {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Refusal::Other
    }

    fn invalid_type(unexpected: Unexpected<'_>, _expected: &dyn de::Expected) -> Self {
        if unexpected == Unexpected::Map {
            Refusal::NotAnObject
        } else {
            Refusal::Other
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Default, PartialEq, Deserialize)]
    struct UnitConfig;

    #[derive(Debug, Default, PartialEq, Deserialize)]
    struct RequiredField {
        level: u8,
    }

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(default)]
    struct AllDefaults {
        level: u8,
        names: Vec<String>,
    }

    /// What `parse::<C>` says, as text: the config or serde_json's message.
    fn parsed<C: DeserializeOwned + Default + fmt::Debug>(config_json: &str) -> String {
        match parse::<C>(config_json) {
            Ok(config) => format!("{config:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn nothing_configured_is_the_default_for_types_that_take_no_object() {
        for raw in ["", " \n", "null", "{}", " { } "] {
            assert_eq!(parse::<()>(raw).ok(), Some(()), "() from {raw:?}");
            assert_eq!(parse::<UnitConfig>(raw).ok(), Some(UnitConfig), "{raw:?}");
            assert_eq!(parse::<Vec<String>>(raw).ok(), Some(vec![]), "{raw:?}");
            assert_eq!(parse::<u8>(raw).ok(), Some(0), "{raw:?}");
        }
        assert_eq!(
            parse::<Vec<String>>(r#"["a"]"#).ok(),
            Some(vec!["a".into()])
        );
    }

    #[test]
    fn a_struct_reads_the_empty_object_itself() {
        assert_eq!(
            parse::<AllDefaults>("{}").ok(),
            Some(AllDefaults::default())
        );
        assert_eq!(
            parse::<AllDefaults>(r#"{"level":2}"#).ok(),
            Some(AllDefaults {
                level: 2,
                names: vec![]
            })
        );
        assert_eq!(
            parsed::<RequiredField>("{}"),
            "missing field `level` at line 1 column 2"
        );
        assert_eq!(
            parsed::<RequiredField>(r#"{"level":3}"#),
            "RequiredField { level: 3 }"
        );
    }

    #[test]
    fn an_option_is_none_unless_its_type_reads_the_empty_object() {
        assert_eq!(
            parse::<Option<AllDefaults>>("{}").ok(),
            Some(Some(AllDefaults::default()))
        );
        assert_eq!(parse::<Option<RequiredField>>("{}").ok(), Some(None));
        assert_eq!(
            parsed::<Option<RequiredField>>(r#"{"level":"high"}"#),
            "invalid type: string \"high\", expected u8 at line 1 column 15"
        );
    }

    #[test]
    fn only_the_empty_object_is_nothing_configured() {
        assert_eq!(
            parsed::<()>(r#"{"strict":true}"#),
            "invalid type: map, expected unit at line 1 column 0"
        );
        assert_eq!(
            parsed::<()>("[]"),
            "invalid type: sequence, expected unit at line 1 column 0"
        );
        // Not JSON, so not `{}` either; serde_json refuses it by its first byte.
        assert_eq!(
            parsed::<()>("{"),
            "invalid type: map, expected unit at line 1 column 0"
        );
        assert_eq!(
            parsed::<u8>("{}x"),
            "invalid type: map, expected u8 at line 1 column 0"
        );
    }

    #[test]
    fn the_probe_tells_objects_from_their_contents() {
        assert!(takes_no_object::<()>());
        assert!(takes_no_object::<UnitConfig>());
        assert!(takes_no_object::<Vec<String>>());
        assert!(takes_no_object::<String>());
        assert!(takes_no_object::<u8>());
        assert!(!takes_no_object::<RequiredField>());
        assert!(!takes_no_object::<AllDefaults>());
        assert!(!takes_no_object::<BTreeMap<String, u8>>());
        assert!(!takes_no_object::<Value>());
    }
}
