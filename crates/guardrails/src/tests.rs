use serde_json::json;

use super::*;

// Test values, built so that no real secret sits in the source.
fn private_key() -> String {
    format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA".repeat(4)
    )
}
fn aws_key() -> String {
    format!("AKIA{}", "IOSFODNN7EXAMPLE")
}
fn jwt() -> String {
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c3JfMSJ9.c2lnbmF0dXJlLWJ5dGVz".to_owned()
}
fn github() -> String {
    format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0".repeat(2))
}
const ENTROPIC: &str = "q8Zr2Lw0Vx7Nf3Jk9Pd5Tb1Hm6Yc4Gs";

fn all() -> Masks {
    Masks::new().secrets(&SecretKind::ALL, &["password".to_owned()])
}

#[test]
fn each_kind_is_found_in_text_and_masked_whole() {
    for (text, kind) in [
        (format!("key:\n{}\nbye", private_key()), "private_key"),
        (format!("id {} ok", aws_key()), "cloud_access_key"),
        (
            format!("AIza{}", "SyA-1234567890abcdefghijklmnopqrstu"),
            "cloud_access_key",
        ),
        (
            "Authorization: Bearer abcdef123456.xyz".to_owned(),
            "bearer_token",
        ),
        (format!("token {}", github()), "bearer_token"),
        (format!("Bearer {}", jwt()), "jwt"),
    ] {
        let mut masked = text.clone();
        assert_eq!(all().mask_text(&mut masked), [kind], "{text}");
        assert!(masked.contains(&format!("[SECRET:{kind}]")), "{masked}");
        for secret in [private_key(), aws_key(), jwt(), github()] {
            assert!(!masked.contains(&secret), "{masked}");
        }
    }
    // A cut key is masked to the end of the text.
    let mut cut = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg".to_owned();
    all().mask_text(&mut cut);
    assert_eq!(cut, "[SECRET:private_key]");
}

#[test]
fn ordinary_text_is_left_alone() {
    for text in [
        "Refund order 42 for 100 EUR",
        "bearer of good news",
        "AKIA is a prefix",
        "the password is in the vault",
        "eyJ alone",
    ] {
        let mut same = text.to_owned();
        assert!(all().mask_text(&mut same).is_empty(), "{text}");
        assert_eq!(same, text);
    }
}

#[test]
fn high_entropy_only_in_named_fields_and_after_the_patterns() {
    let mut value = json!({
        "password": ENTROPIC,
        "PassWord": "short",
        "note": ENTROPIC,
        "nested": [{ "password": jwt() }],
    });
    let (mut findings, entropic) = all().mask_value(&mut value, "");
    findings.sort();
    assert_eq!(
        findings,
        [
            Finding {
                kind: "high_entropy".into(),
                at: "/password".into()
            },
            Finding {
                kind: "jwt".into(),
                at: "/nested/0/password".into()
            },
        ]
    );
    assert_eq!(entropic, [ENTROPIC]);
    assert_eq!(value["password"], "[SECRET:high_entropy]");
    assert_eq!(value["note"], ENTROPIC, "not a named field");
    assert_eq!(value["PassWord"], "short", "too short to be a secret");
    let mut text = format!("{{\"password\":\"{ENTROPIC}\"}}");
    assert!(mask_copies(&mut text, &entropic));
    assert!(!text.contains(ENTROPIC));
}

#[test]
fn find_names_kinds_and_pointers_and_leaves_the_value() {
    let args =
        json!({ "to": "a@example.com", "body": format!("use {}", aws_key()), "a/b": [jwt()] });
    let before = args.clone();
    let mut findings = find(&all(), &args);
    findings.sort();
    assert_eq!(
        findings,
        [
            Finding {
                kind: "cloud_access_key".into(),
                at: "/body".into()
            },
            Finding {
                kind: "jwt".into(),
                at: "/a~1b/0".into()
            },
        ]
    );
    assert_eq!(args, before);
    assert!(!format!("{findings:?}").contains(&aws_key()));
}

#[test]
fn only_the_kinds_asked_for_are_masked() {
    let masks = Masks::new().secrets(&[SecretKind::Jwt], &[]);
    let mut text = format!("{} {}", aws_key(), jwt());
    assert_eq!(masks.mask_text(&mut text), ["jwt"]);
    assert_eq!(text, format!("{} [SECRET:jwt]", aws_key()));
}

#[test]
fn identifiers_are_masked_with_their_names_and_bad_ones_refused() {
    let customer = Identifier::new("customer-id", r"CUS-\d{8}").unwrap();
    let masks = Masks::new().identifiers(vec![customer]);
    let mut text = "order of CUS-12345678 and CUS-87654321; $1 stays".to_owned();
    assert_eq!(masks.mask_text(&mut text), ["customer-id"]);
    assert_eq!(text, "order of [CUSTOMER-ID] and [CUSTOMER-ID]; $1 stays");
    assert!(
        Identifier::new("bad name", "x")
            .unwrap_err()
            .contains("bad name")
    );
    assert!(
        Identifier::new("id", "(")
            .unwrap_err()
            .contains("not valid")
    );
    assert!(
        Identifier::new("id", "x*")
            .unwrap_err()
            .contains("empty string")
    );
    assert!(
        Identifier::new("id", "\\w{1000}{1000}")
            .unwrap_err()
            .contains("not valid")
    );
}
