//! What a call adds to Cedar's request: the caller and its tenant, and the context.
//!
//! These are built from the Cedar core's types (`cedar-policy-core`, at the version
//! `cedar-policy` pins) and handed over through `cedar-policy`'s `From` conversions, where the
//! public API would do at every call what needs doing once:
//! - `RestrictedExpression::new_decimal` runs Cedar's full parser on the name `decimal` (its
//!   lexer builds an automaton at each parse);
//! - `Entities::from_entities` and `add_entities` compute the transitive closure again, where
//!   the tool's entities are closed once when the rules are packed and a call adds only a
//!   caller in one tenant;
//! - `Context::from_pairs` and `Entity::new` evaluate, as expressions, what are values already.
//!
//! In the sandbox, these were two thirds of a decision's time. The conversions are
//! `doc(hidden)`: an upgrade of `cedar-policy` that drops them fails to build, it cannot
//! change a decision in silence.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, LazyLock};

use cedar_policy::{Context, Entities, EntityUid};
use cedar_policy_core::ast::{self, PartialValue};
use cedar_policy_core::entities::{NoEntitiesSchema, TCComputation};
use cedar_policy_core::extensions::Extensions;
use serde_json::Value;

use crate::{Call, schema, uid};

/// The name of Cedar's `decimal` constructor, parsed once.
static DECIMAL: LazyLock<ast::Name> = LazyLock::new(|| {
    ast::Name::unqualified_name("decimal".parse().expect("`decimal` is an identifier"))
});

const DAY_MS: u64 = 86_400_000;

/// `entities` with the call's caller (the chain's last link, `in` its tenant, with its roles and
/// groups) and the tenant added, and the caller's uid.
pub(crate) fn with_caller(
    entities: &Entities,
    call: &Call,
) -> Result<(EntityUid, Entities), String> {
    let last = call.principals.last();
    let id = last.map_or("anonymous", |p| p.id.as_str());
    let kind = last.map_or("user", |p| p.kind.as_str());
    let principal = uid("Caller", id)?;
    let tenant = uid("Tenant", &call.tenant)?;
    let chain = strings(call.principals.iter().map(|p| p.id.as_str()));
    let caller = ast::Entity::new_with_attr_partial_value(
        principal.as_ref().clone(),
        [
            (
                "tenant".into(),
                ast::Value::from(call.tenant.as_str()).into(),
            ),
            ("kind".into(), ast::Value::from(kind).into()),
            ("chain".into(), PartialValue::Value(chain)),
            (
                "roles".into(),
                strings(call.roles.iter().map(String::as_str)).into(),
            ),
            (
                "groups".into(),
                strings(call.groups.iter().map(String::as_str)).into(),
            ),
        ],
        HashSet::new(),
        HashSet::from([tenant.as_ref().clone()]),
        [],
    );
    let tenant = ast::Entity::with_uid(tenant.as_ref().clone());
    // The closure holds as it is: the tool's entities were closed when packed, the caller's
    // one parent is the tenant, which has none.
    let entities = entities
        .as_ref()
        .clone()
        .add_entities(
            [Arc::new(caller), Arc::new(tenant)],
            None::<&NoEntitiesSchema>,
            TCComputation::AssumeAlreadyComputed,
            Extensions::all_available(),
        )
        .map_err(|e| e.to_string())?;
    Ok((principal, Entities::from(entities)))
}

/// A set of strings.
fn strings<'a>(items: impl IntoIterator<Item = &'a str>) -> ast::Value {
    ast::Value::set(items.into_iter().map(ast::Value::from), None)
}

/// The context: `args` typed by the tool's input schema (if it is known), `mode`, the time
/// (`now`, `hour`, `weekday`), `prior_actions`, `data_classification`, `skills`, `session`
/// (`labels`, `tools`), `protocol` and, for a delegated call, `delegated_by`.
pub(crate) fn context(call: &Call, schema: Option<&Value>) -> Result<Context, String> {
    let list = |items: &[String]| strings(items.iter().map(String::as_str));
    let long = |n: u64| ast::Value::from(i64::try_from(n).unwrap_or(i64::MAX));
    let args = value(&call.args, schema, "args")?.unwrap_or_else(|| ast::Value::empty_record(None));
    let days = call.now_unix_ms / DAY_MS;
    let mut pairs = BTreeMap::from([
        ("args".into(), args),
        ("mode".into(), ast::Value::from(call.mode.as_str())),
        ("now".into(), long(call.now_unix_ms)),
        ("hour".into(), long(call.now_unix_ms % DAY_MS / 3_600_000)),
        // 1970-01-01 was a Thursday (4).
        ("weekday".into(), long((days + 3) % 7 + 1)),
        ("prior_actions".into(), list(&call.prior_actions)),
        (
            "data_classification".into(),
            list(&call.data_classification),
        ),
        ("skills".into(), list(&call.skills)),
        ("protocol".into(), ast::Value::from(call.protocol.as_str())),
        (
            "session".into(),
            ast::Value::record(
                [
                    ("labels", list(&call.data_classification)),
                    ("tools", list(&call.prior_actions)),
                ],
                None,
            ),
        ),
    ]);
    if let Some(by) = &call.delegated_by {
        pairs.insert("delegated_by".into(), ast::Value::from(by.as_str()));
    }
    Ok(Context::from(ast::Context::Value(Arc::new(pairs))))
}

/// A JSON value as Cedar holds it, typed by its JSON Schema where one is known (`number` is a
/// decimal even when the value is whole). `None`: a value Cedar has no type for (`null`).
fn value(v: &Value, schema: Option<&Value>, path: &str) -> Result<Option<ast::Value>, String> {
    let declared = schema.and_then(schema::json_type);
    Ok(Some(match v {
        Value::Null => return Ok(None),
        Value::Bool(b) => ast::Value::from(*b),
        Value::String(s) => ast::Value::from(s.as_str()),
        Value::Number(n) => match (declared, n.as_i64()) {
            (Some("integer"), Some(i)) | (None, Some(i)) => ast::Value::from(i),
            _ => decimal(n, path)?,
        },
        Value::Array(items) => {
            let element = schema.and_then(|s| s.get("items"));
            let mut set = Vec::new();
            for (i, item) in items.iter().enumerate() {
                set.extend(value(item, element, &format!("{path}[{i}]"))?);
            }
            ast::Value::set(set, None)
        }
        Value::Object(map) => {
            let properties = schema.and_then(|s| s.get("properties"));
            let mut fields = Vec::new();
            for (key, item) in map {
                let property = properties.and_then(|p| p.get(key));
                if let Some(item) = value(item, property, &format!("{path}.{key}"))? {
                    fields.push((key.as_str(), item));
                }
            }
            ast::Value::record(fields, None)
        }
    }))
}

/// A JSON number as a Cedar decimal (four places at most); a number a decimal cannot hold
/// exactly is an error, not a rounding a threshold could slip through.
fn decimal(n: &serde_json::Number, path: &str) -> Result<ast::Value, String> {
    let text = n.to_string();
    let bad = || {
        format!(
            "`{path}` = {text} is not a Cedar decimal (at most 4 decimal places, below 922337203685477)"
        )
    };
    if text.contains(['e', 'E']) {
        return Err(bad());
    }
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, "0"));
    if fraction.len() > 4 || whole.trim_start_matches('-').len() > 15 {
        return Err(bad());
    }
    let constructor = Extensions::all_available()
        .func(&DECIMAL)
        .map_err(|e| e.to_string())?;
    match constructor.call(&[ast::Value::from(format!("{whole}.{fraction}").as_str())]) {
        Ok(PartialValue::Value(value)) => Ok(value),
        Ok(PartialValue::Residual(_)) | Err(_) => Err(bad()),
    }
}
