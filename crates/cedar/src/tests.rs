use serde_json::json;

use super::*;
use crate::check::check;

fn tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "shop.refund".into(),
            adapter: "shop".into(),
            capability: "refund".into(),
            class: "act".into(),
            max_mode: "network".into(),
            input_schema: json!({
                "type": "object",
                "required": ["order", "amount"],
                "properties": {
                    "order": { "type": "string" },
                    "amount": { "type": "number" },
                    "note": { "type": "string" }
                }
            }),
            annotations: HashMap::from([("destructive".to_owned(), false)]),
            produces: vec!["private".into()],
            sends: Vec::new(),
        },
        Tool {
            name: "mail.send".into(),
            adapter: "mail".into(),
            capability: "send".into(),
            class: "act".into(),
            max_mode: "destructive".into(),
            input_schema: json!({
                "type": "object",
                "required": ["to"],
                "properties": { "to": { "type": "string" }, "count": { "type": "integer" } }
            }),
            annotations: HashMap::new(),
            produces: Vec::new(),
            sends: vec!["external".into()],
        },
    ]
}

fn call(tool: &str, tenant: &str, args: Value) -> Call {
    let (adapter, capability) = tool.split_once('.').unwrap();
    let max_mode = if tool == "mail.send" {
        "destructive"
    } else {
        "network"
    };
    Call {
        tool: tool.into(),
        adapter: adapter.into(),
        capability: capability.into(),
        class: "act".into(),
        max_mode: max_mode.into(),
        mode: max_mode.into(),
        args,
        tenant: tenant.into(),
        principals: vec![Principal {
            kind: "user".into(),
            id: "user:7".into(),
        }],
        // 2026-11-27 (a Friday) 10:00 UTC.
        now_unix_ms: 1_795_773_600_000,
        prior_actions: Vec::new(),
        data_classification: Vec::new(),
        roles: Vec::new(),
        groups: Vec::new(),
        skills: Vec::new(),
        protocol: "mcp".to_owned(),
        delegated_by: None,
    }
}

const RULES: &str = r#"
@id("refunds-over-100")
@reason("refunds over 100 need a person")
@approval("required")
permit (principal, action == Action::"shop.refund", resource)
when { context.args.amount.greaterThan(decimal("100.0")) };

@id("small-refunds")
@approval("local_write")
@redact("/card")
@evidence("refund-policy-v3")
permit (principal, action == Action::"shop.refund", resource)
when { context.args.amount.lessThanOrEqual(decimal("100.0")) };

@id("trial-no-mail")
@reason("tenant trial may not send email")
forbid (principal in Tenant::"trial", action == Action::"mail.send", resource);

@id("mail")
@mask_pii("email")
permit (principal, action == Action::"mail.send", resource in Adapter::"mail");
"#;

fn rules() -> Rules {
    checked(RULES)
}

/// `text`, checked against [`tools`] and parsed.
fn checked(text: &str) -> Rules {
    check(text, &tools()).unwrap();
    Rules::new(&Packed {
        rules: text.into(),
        tools: tools(),
    })
    .unwrap()
}

#[test]
fn each_verdict_names_the_rules_that_matched() {
    let rules = rules();
    let big = rules.decide(&call(
        "shop.refund",
        "acme",
        json!({"order": "o1", "amount": 100.5}),
    ));
    assert_eq!(big.verdict, Verdict::RequireApproval);
    assert_eq!(big.reasons[0].code, "refunds-over-100");
    assert_eq!(big.reasons[0].message, "refunds over 100 need a person");

    let small = rules.decide(&call(
        "shop.refund",
        "acme",
        json!({"order": "o1", "amount": 20}),
    ));
    assert_eq!(small.verdict, Verdict::Allow);
    assert_eq!(small.effective_mode.as_deref(), Some("local_write"));
    assert_eq!(small.redact, ["/card"]);
    assert_eq!(small.evidence, ["refund-policy-v3"]);
    assert_eq!(small.reasons[0].code, "small-refunds");

    let trial = rules.decide(&call("mail.send", "trial", json!({"to": "a@b"})));
    assert_eq!(trial.verdict, Verdict::Deny);
    assert_eq!(
        trial.reasons,
        [Reason {
            code: "trial-no-mail".into(),
            message: "tenant trial may not send email".into()
        }]
    );

    let mail = rules.decide(&call("mail.send", "acme", json!({"to": "a@b"})));
    assert_eq!(mail.verdict, Verdict::Allow);
    assert_eq!(mail.mask_pii, ["email"]);

    // A tool no rule names: abstain.
    let other = rules.decide(&call("notes.add", "acme", json!({})));
    assert_eq!(other.verdict, Verdict::Abstain);
    assert!(other.reasons.is_empty());
}

#[test]
fn rules_over_the_session_allow_deny_and_ask_and_a_mistyped_one_is_refused() {
    let rules = checked(
        r#"
@id("trifecta")
@reason("private data and untrusted content in this session; sending out needs a person")
@approval("required")
permit (principal, action, resource)
when {
    context.session.labels.contains("private") &&
    context.session.labels.contains("untrusted") &&
    resource.sends.contains("external")
};

@id("no-mail-after-secrets")
forbid (principal, action == Action::"mail.send", resource)
when { context.session.labels.contains("secret") };

@id("refund-after-lookup")
permit (principal, action == Action::"shop.refund", resource)
when { context.session.tools.contains("shop.lookup") && resource.produces.contains("private") };
"#,
    );
    let mut mail = call("mail.send", "acme", json!({"to": "a@b"}));
    mail.data_classification = vec!["private".into(), "untrusted".into()];
    let asked = rules.decide(&mail);
    assert_eq!(asked.verdict, Verdict::RequireApproval);
    assert_eq!(asked.reasons[0].code, "trifecta");
    mail.data_classification = vec!["untrusted".into()];
    assert_eq!(rules.decide(&mail).verdict, Verdict::Abstain);
    mail.data_classification = vec!["secret".into()];
    assert_eq!(rules.decide(&mail).verdict, Verdict::Deny);
    let mut refund = call("shop.refund", "acme", json!({"order": "o", "amount": 1}));
    assert_eq!(rules.decide(&refund).verdict, Verdict::Abstain);
    refund.prior_actions = vec!["shop.lookup".into()];
    assert_eq!(rules.decide(&refund).verdict, Verdict::Allow);

    // Labels are a set of strings: comparing it to a string, or a field it lacks, is refused
    // when the rules are packed.
    for (mistyped, says) in [
        (
            r#"permit (principal, action, resource) when { context.session.labels == "private" };"#,
            "Set<String>",
        ),
        (
            r#"permit (principal, action, resource) when { context.session.label.contains("x") };"#,
            "label",
        ),
        (
            r#"permit (principal, action, resource) when { resource.sends like "ext*" };"#,
            "Set<String>",
        ),
    ] {
        let found = problems(mistyped);
        assert!(!found.is_empty(), "{mistyped} was accepted");
        assert!(
            found.iter().any(|p| p.contains(says)),
            "{mistyped}: {found:?}"
        );
    }
}

#[test]
fn a_mode_above_the_maximum_denies_and_a_number_a_decimal_cannot_hold_denies() {
    let text = r#"@id("up") @approval("destructive") permit (principal, action, resource);"#;
    let rules = Rules::new(&Packed {
        rules: text.into(),
        tools: tools(),
    })
    .unwrap();
    let up = rules.decide(&call(
        "shop.refund",
        "acme",
        json!({"order": "o", "amount": 1}),
    ));
    assert_eq!(up.verdict, Verdict::Deny);
    assert_eq!(up.reasons[0].code, "APPROVAL_ABOVE_MAXIMUM");
    // mail.send's maximum is destructive: allowed there.
    let ok = rules.decide(&call("mail.send", "acme", json!({"to": "x"})));
    assert_eq!(ok.verdict, Verdict::Allow);

    let precise = self::rules().decide(&call(
        "shop.refund",
        "acme",
        json!({"order": "o", "amount": 100.00001}),
    ));
    assert_eq!(precise.verdict, Verdict::Deny);
    assert!(
        precise.reasons[0].message.contains("args.amount"),
        "{precise:?}"
    );
}

#[test]
fn the_time_of_day_and_the_weekday_are_utc() {
    let text = r#"@id("hours") forbid (principal, action, resource) unless { context.hour >= 9 && context.hour < 17 && context.weekday <= 5 };"#;
    let rules = Rules::new(&Packed {
        rules: text.into(),
        tools: tools(),
    })
    .unwrap();
    let mut c = call("mail.send", "acme", json!({"to": "x"}));
    assert_eq!(rules.decide(&c).verdict, Verdict::Abstain, "Friday 10:00");
    c.now_unix_ms += 8 * 3_600_000;
    assert_eq!(rules.decide(&c).verdict, Verdict::Deny, "Friday 18:00");
    c.now_unix_ms += 16 * 3_600_000;
    assert_eq!(rules.decide(&c).verdict, Verdict::Deny, "Saturday 10:00");
}

#[test]
fn the_callers_roles_and_groups_and_the_calls_skills_decide() {
    let text = r#"
@id("refunds-need-the-role")
@reason("only the refunds role issues refunds")
forbid (principal, action == Action::"shop.refund", resource)
unless { principal.roles.contains("refunds") };

@id("eu-mail")
permit (principal, action == Action::"mail.send", resource)
when { principal.groups.contains("eu") && context.skills.contains("mail-tone") };
"#;
    let rules = checked(text);
    let mut refund = call("shop.refund", "acme", json!({"order": "o", "amount": 1}));
    let denied = rules.decide(&refund);
    assert_eq!(denied.verdict, Verdict::Deny);
    assert_eq!(denied.reasons[0].code, "refunds-need-the-role");
    refund.roles = vec!["support".into(), "refunds".into()];
    assert_eq!(rules.decide(&refund).verdict, Verdict::Abstain);

    let mut mail = call("mail.send", "acme", json!({"to": "x"}));
    mail.groups = vec!["eu".into()];
    assert_eq!(rules.decide(&mail).verdict, Verdict::Abstain, "no skill");
    mail.skills = vec!["mail-tone".into()];
    assert_eq!(rules.decide(&mail).verdict, Verdict::Allow);
    mail.groups = vec!["us".into()];
    assert_eq!(
        rules.decide(&mail).verdict,
        Verdict::Abstain,
        "another group"
    );

    // The claims are typed: a misspelled attribute, or one used as another type, is refused.
    assert!(
        check(
            r#"forbid (principal, action, resource) unless { principal.role.contains("x") };"#,
            &tools()
        )
        .is_err()
    );
    assert!(
        check(
            r#"forbid (principal, action, resource) when { context.skills == "x" };"#,
            &tools()
        )
        .is_err()
    );
}

fn problems(text: &str) -> Vec<String> {
    check(text, &tools())
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn validation_names_the_line_and_column_of_each_mistake() {
    let unknown_tool =
        problems("permit (principal,\n  action == Action::\"shop.refnd\", resource);");
    assert!(
        unknown_tool[0].starts_with("line 2, column 13:"),
        "{unknown_tool:?}"
    );
    assert!(unknown_tool[0].contains("shop.refund"), "{unknown_tool:?}");

    let unknown_arg = problems(
        "permit (principal, action == Action::\"shop.refund\", resource)\nwhen { context.args.amonut.greaterThan(decimal(\"1.0\")) };",
    );
    assert!(
        unknown_arg[0].starts_with("line 2, column 8:"),
        "{unknown_arg:?}"
    );
    assert!(unknown_arg[0].contains("amonut"), "{unknown_arg:?}");

    let wrong_type = problems(
        "permit (principal, action == Action::\"shop.refund\", resource)\nwhen { context.args.order > 3 };",
    );
    assert!(
        wrong_type[0].starts_with("line 2, column 8:"),
        "{wrong_type:?}"
    );
    assert!(wrong_type[0].contains("String"), "{wrong_type:?}");

    let resource = problems("forbid (principal, action, resource == Tool::\"shop.refnd\");");
    assert_eq!(
        resource,
        [
            "line 1, column 40: Tool::\"shop.refnd\" is not a tool the config serves; did you mean `Tool::\"shop.refund\"`?"
        ]
    );

    let never = problems(
        "forbid (principal, action == Action::\"mail.send\", resource)\nwhen { resource in Tenant::\"trial\" };",
    );
    assert!(
        never[0].starts_with("line 1, column 1: the rule can never apply"),
        "{never:?}"
    );

    let above = problems(
        "@approval(\"destructive\")\npermit (principal, action == Action::\"shop.refund\", resource);",
    );
    assert!(
        above[0].starts_with(
            "line 1, column 1: @approval(\"destructive\") is above the declared maximum `network`"
        ),
        "{above:?}"
    );

    let annotation = problems(
        "@redact(\"card\")\npermit (principal, action == Action::\"shop.refund\", resource);",
    );
    assert!(
        annotation[0].starts_with("line 1, column 1: @redact: `card` is not a JSON pointer"),
        "{annotation:?}"
    );

    let syntax = problems("permit (principal, action, resource)\nwhen { context.hour > };");
    assert!(syntax[0].starts_with("line 2, column"), "{syntax:?}");
}

#[test]
fn rules_for_every_tool_and_rules_for_one_combine_as_one_set() {
    let text = r#"
@id("all") permit (principal, action in Action::"call", resource);
@id("no-mail") forbid (principal, action == Action::"mail.send", resource);
@id("mail-for-trial") @reason("trial sends no mail") forbid (principal in Tenant::"trial", action in Action::"call", resource in Adapter::"mail");
"#;
    let rules = checked(text);
    let refund = rules.decide(&call(
        "shop.refund",
        "acme",
        json!({"order": "o", "amount": 1}),
    ));
    assert_eq!(
        (refund.verdict, refund.reasons[0].code.as_str()),
        (Verdict::Allow, "all")
    );
    let mail = rules.decide(&call("mail.send", "trial", json!({"to": "x"})));
    assert_eq!(mail.verdict, Verdict::Deny);
    let codes: Vec<&str> = mail.reasons.iter().map(|r| r.code.as_str()).collect();
    assert_eq!(codes, ["mail-for-trial", "no-mail"]);
}

#[test]
fn a_thousand_rules_for_every_tool_over_a_thousand_tools_are_kept_once() {
    let tools: Vec<Tool> = (0..1000)
        .map(|n| Tool {
            name: format!("shop.t{n}"),
            adapter: "shop".into(),
            capability: format!("t{n}"),
            ..tools()[0].clone()
        })
        .collect();
    let text: String = (0..1000)
        .map(|i| format!("@id(\"r{i}\") forbid (principal, action in Action::\"call\", resource) when {{ principal.tenant == \"t{i}\" }};\n"))
        .collect();
    let rules = Rules::new(&Packed { rules: text, tools }).unwrap();
    assert_eq!(rules.general.policies().count(), 1000);
    assert!(rules.tools.values().all(|slice| slice.policies.is_empty()));
    let mut c = call("shop.refund", "t7", json!({"order": "o", "amount": 1}));
    c.tool = "shop.t3".into();
    c.capability = "t3".into();
    assert_eq!(rules.decide(&c).reasons[0].code, "r7");
}

/// `request` builds the caller and the context from Cedar's core types. They must be what
/// Cedar's public API builds (expressions evaluated, the closure computed) from the same call.
#[test]
fn the_request_is_what_the_public_api_builds() {
    use cedar_policy::{Context, RestrictedExpression as Re};

    fn public(v: &Value, schema: Option<&Value>) -> Option<Re> {
        let declared = schema.and_then(schema::json_type);
        Some(match v {
            Value::Null => return None,
            Value::Bool(b) => Re::new_bool(*b),
            Value::String(s) => Re::new_string(s.clone()),
            Value::Number(n) => match (declared, n.as_i64()) {
                (Some("integer"), Some(i)) | (None, Some(i)) => Re::new_long(i),
                _ => Re::new_decimal(if n.is_f64() {
                    n.to_string()
                } else {
                    format!("{n}.0")
                }),
            },
            Value::Array(items) => Re::new_set(
                items
                    .iter()
                    .filter_map(|item| public(item, schema.and_then(|s| s.get("items")))),
            ),
            Value::Object(map) => Re::new_record(map.iter().filter_map(|(k, item)| {
                let property = schema.and_then(|s| s.get("properties")?.get(k));
                Some((k.clone(), public(item, property)?))
            }))
            .unwrap(),
        })
    }

    let schema = json!({
        "type": "object",
        "properties": {
            "amount": { "type": "number" },
            "whole": { "type": "number" },
            "count": { "type": "integer" },
            "tags": { "type": "array", "items": { "type": "number" } },
            "card": { "type": "object", "properties": { "limit": { "type": "number" } } }
        }
    });
    let args = json!({
        "amount": 100.25, "whole": 7, "count": -3, "note": "n", "gone": null, "ok": true,
        "tags": [1.5, 2, 1.5], "card": { "limit": 0.0001, "holder": "h" }, "free": [1, "a"]
    });
    let mut call = call("shop.refund", "acme", args.clone());
    call.principals.insert(
        0,
        Principal {
            kind: "agent".into(),
            id: "agent:1".into(),
        },
    );
    call.prior_actions = vec!["b".into(), "a".into(), "b".into()];
    call.data_classification = vec!["pii".into()];
    call.roles = vec!["refunds".into(), "support".into()];
    call.groups = vec!["eu".into()];
    call.skills = vec!["refund-tone".into()];
    call.delegated_by = Some("call_1".into());

    for schema in [Some(&schema), None] {
        let strings =
            |items: &[String]| Re::new_set(items.iter().map(|s| Re::new_string(s.clone())));
        let expected = Context::from_pairs([
            ("args".to_owned(), public(&args, schema).unwrap()),
            ("mode".to_owned(), Re::new_string(call.mode.clone())),
            ("now".to_owned(), Re::new_long(1_795_773_600_000)),
            ("hour".to_owned(), Re::new_long(10)),
            ("weekday".to_owned(), Re::new_long(5)),
            ("prior_actions".to_owned(), strings(&call.prior_actions)),
            (
                "data_classification".to_owned(),
                strings(&call.data_classification),
            ),
            ("skills".to_owned(), strings(&call.skills)),
            ("protocol".to_owned(), Re::new_string("mcp".into())),
            ("delegated_by".to_owned(), Re::new_string("call_1".into())),
            (
                "session".to_owned(),
                Re::new_record([
                    ("labels".to_owned(), strings(&call.data_classification)),
                    ("tools".to_owned(), strings(&call.prior_actions)),
                ])
                .unwrap(),
            ),
        ])
        .unwrap();
        assert_eq!(request::context(&call, schema).unwrap(), expected);
    }

    let tool = &tools()[0];
    let base = Entities::from_entities(tool_entities(tool).unwrap(), None).unwrap();
    let caller = Entity::new(
        uid("Caller", "user:7").unwrap(),
        HashMap::from([
            ("tenant".to_owned(), Re::new_string("acme".into())),
            ("kind".to_owned(), Re::new_string("user".into())),
            (
                "chain".to_owned(),
                Re::new_set([
                    Re::new_string("agent:1".into()),
                    Re::new_string("user:7".into()),
                ]),
            ),
            (
                "roles".to_owned(),
                Re::new_set([
                    Re::new_string("refunds".into()),
                    Re::new_string("support".into()),
                ]),
            ),
            (
                "groups".to_owned(),
                Re::new_set([Re::new_string("eu".into())]),
            ),
        ]),
        HashSet::from([uid("Tenant", "acme").unwrap()]),
    )
    .unwrap();
    let tenant = Entity::new_no_attrs(uid("Tenant", "acme").unwrap(), HashSet::new());
    let expected = base.clone().add_entities([caller, tenant], None).unwrap();
    let (principal, entities) = request::with_caller(&base, &call).unwrap();
    assert_eq!(principal, uid("Caller", "user:7").unwrap());
    // `Entities`' `==` compares the uids only; `deep_eq` compares attributes and ancestors.
    assert!(
        entities.deep_eq(&expected),
        "{entities:?}\n!=\n{expected:?}"
    );
}

#[test]
fn rules_see_how_a_call_came_and_on_whose_behalf() {
    let rules = checked(
        r#"
@id("peers-may-not-refund")
forbid (principal, action == Action::"shop.refund", resource)
when { context has delegated_by && principal.chain.contains("user:7") };

@id("a2a-no-mail")
forbid (principal, action == Action::"mail.send", resource)
when { context.protocol == "a2a" };

@id("the-rest")
permit (principal, action, resource);
"#,
    );
    let refund = || call("shop.refund", "acme", json!({"order": "o1", "amount": 5}));
    assert_eq!(rules.decide(&refund()).verdict, Verdict::Allow);
    let mut delegated = refund();
    delegated.delegated_by = Some("call_1".into());
    delegated.principals.push(Principal {
        kind: "agent".into(),
        id: "agent:peer".into(),
    });
    let denied = rules.decide(&delegated);
    assert_eq!(
        (denied.verdict, denied.reasons[0].code.as_str()),
        (Verdict::Deny, "peers-may-not-refund")
    );

    let mut mail = call("mail.send", "acme", json!({"to": "a@b"}));
    assert_eq!(rules.decide(&mail).verdict, Verdict::Allow);
    mail.protocol = "a2a".into();
    assert_eq!(rules.decide(&mail).verdict, Verdict::Deny);
}
