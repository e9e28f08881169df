//! The verifier against tokens signed in the test with freshly generated RSA, P-256, Ed25519
//! and HMAC keys: only the valid ones are admitted, each refusal with its exact reason.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::{EncodingKey, Header};
use rsa::pkcs1::{EncodeRsaPrivateKey, EncodeRsaPublicKey};
use rsa::traits::PublicKeyParts;
use serde_json::json;

use super::*;

const ISS: &str = "https://idp.test/";
const AUD: &str = "https://gatehouse.test/mcp";

/// A signing key with its public JWK.
pub(crate) struct TestKey {
    pub(crate) alg: Algorithm,
    pub(crate) kid: String,
    pub(crate) encoding: EncodingKey,
    pub(crate) jwk: Value,
}

pub(crate) fn rsa_key(kid: &str) -> (TestKey, Vec<u8>) {
    let private = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).unwrap();
    let public = private.to_public_key();
    let jwk = json!({
        "kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
        "n": B64.encode(public.n().to_bytes_be()), "e": B64.encode(public.e().to_bytes_be()),
    });
    let key = TestKey {
        alg: Algorithm::RS256,
        kid: kid.to_owned(),
        encoding: EncodingKey::from_rsa_der(private.to_pkcs1_der().unwrap().as_bytes()),
        jwk,
    };
    (key, public.to_pkcs1_der().unwrap().as_bytes().to_vec())
}

pub(crate) fn ec_key(kid: &str) -> TestKey {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let point = pair.public_key_raw();
    assert_eq!((point.len(), point[0]), (65, 4), "uncompressed P-256 point");
    TestKey {
        alg: Algorithm::ES256,
        kid: kid.to_owned(),
        encoding: EncodingKey::from_ec_der(&pair.serialize_der()),
        jwk: json!({
            "kty": "EC", "crv": "P-256", "kid": kid,
            "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..]),
        }),
    }
}

pub(crate) fn ed_key(kid: &str) -> TestKey {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    TestKey {
        alg: Algorithm::EdDSA,
        kid: kid.to_owned(),
        encoding: EncodingKey::from_ed_der(&pair.serialize_der()),
        jwk: json!({ "kty": "OKP", "crv": "Ed25519", "kid": kid, "x": B64.encode(pair.public_key_raw()) }),
    }
}

pub(crate) fn now() -> i64 {
    i64::try_from(jsonwebtoken::get_current_timestamp()).unwrap()
}

pub(crate) fn claims(tenant: &str, sub: &str) -> Value {
    json!({ "iss": ISS, "aud": AUD, "sub": sub, "tenant": tenant, "exp": now() + 600, "iat": now() })
}

pub(crate) fn sign(key: &TestKey, claims: &Value) -> String {
    let mut header = Header::new(key.alg);
    header.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&header, claims, &key.encoding).unwrap()
}

fn config(dir: &tempfile::TempDir, keys: &[&TestKey], algorithms: &[&str]) -> JwtConfig {
    let path = dir.path().join("jwks.json");
    let set = json!({ "keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>() });
    std::fs::write(&path, set.to_string()).unwrap();
    JwtConfig {
        issuer: ISS.to_owned(),
        audience: AUD.to_owned(),
        algorithms: algorithms.iter().map(|a| (*a).to_owned()).collect(),
        jwks_file: Some(path),
        jwks_url: None,
        secret_env: None,
        secret_file: None,
        leeway_secs: 60,
        refresh_secs: 300,
        tenant_claim: "tenant".to_owned(),
        principal_claim: "sub".to_owned(),
        tenant: None,
        roles_claim: "roles".to_owned(),
        groups_claim: "groups".to_owned(),
    }
}

fn verify(verifier: &JwtVerifier, token: &str) -> Result<(String, String), JwtError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime
        .block_on(verifier.verify(token))
        .map(|caller| (caller.tenant, caller.principal.id))
}

fn invalid(reason: &str) -> Result<(String, String), JwtError> {
    Err(JwtError::Invalid(reason.to_owned()))
}

#[test]
fn valid_tokens_of_each_algorithm_name_their_tenant_and_principal() {
    let dir = tempfile::tempdir().unwrap();
    let (rsa, _) = rsa_key("r1");
    let (ec, ed) = (ec_key("e1"), ed_key("d1"));
    let verifier = JwtVerifier::load(
        &config(&dir, &[&rsa, &ec, &ed], &["RS256", "ES256", "EdDSA"]),
        &TlsClient::default(),
    )
    .unwrap();
    for (key, tenant) in [(&rsa, "acme"), (&ec, "globex"), (&ed, "initech")] {
        let token = sign(key, &claims(tenant, "user:7"));
        assert!(looks_like_jwt(&token));
        assert_eq!(
            verify(&verifier, &token),
            Ok((tenant.to_owned(), "user:7".to_owned())),
            "{:?}",
            key.alg
        );
    }
}

#[test]
fn expired_premature_foreign_and_forged_tokens_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (rsa, _) = rsa_key("r1");
    let (impostor, _) = rsa_key("r1");
    let verifier =
        JwtVerifier::load(&config(&dir, &[&rsa], &["RS256"]), &TlsClient::default()).unwrap();
    let with = |field: &str, value: Value| {
        let mut c = claims("acme", "user:7");
        c[field] = value;
        sign(&rsa, &c)
    };
    // Within the 60 s leeway is still valid; beyond it is not.
    assert!(verify(&verifier, &with("exp", json!(now() - 30))).is_ok());
    assert_eq!(
        verify(&verifier, &with("exp", json!(now() - 120))),
        invalid("the token has expired (`exp`)")
    );
    assert_eq!(
        verify(&verifier, &with("nbf", json!(now() + 600))),
        invalid("the token is not valid yet (`nbf`)")
    );
    let mut no_exp = claims("acme", "user:7");
    no_exp.as_object_mut().unwrap().remove("exp");
    assert_eq!(
        verify(&verifier, &sign(&rsa, &no_exp)),
        invalid("the `exp` claim is missing")
    );
    assert_eq!(
        verify(&verifier, &with("aud", json!("https://elsewhere.test/mcp"))),
        invalid("the audience (`aud`) is not this gateway")
    );
    assert_eq!(
        verify(&verifier, &with("iss", json!("https://evil.test/"))),
        invalid("the issuer (`iss`) is not the one this gateway trusts")
    );
    // Same kid, another key: the signature does not verify.
    assert_eq!(
        verify(&verifier, &sign(&impostor, &claims("acme", "user:7"))),
        invalid("the signature does not verify")
    );
    assert_eq!(
        verify(
            &verifier,
            &sign(&rsa_with_kid(&rsa, "r9"), &claims("acme", "u"))
        ),
        Err(JwtError::UnknownKey(Some("r9".to_owned())))
    );
}

fn rsa_with_kid(key: &TestKey, kid: &str) -> TestKey {
    TestKey {
        alg: key.alg,
        kid: kid.to_owned(),
        encoding: key.encoding.clone(),
        jwk: key.jwk.clone(),
    }
}

#[test]
fn alg_none_and_algorithm_confusion_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (rsa, public_der) = rsa_key("r1");
    let verifier =
        JwtVerifier::load(&config(&dir, &[&rsa], &["RS256"]), &TlsClient::default()).unwrap();
    let body = B64.encode(claims("acme", "user:7").to_string());
    let none = format!("{}.{body}.", B64.encode(r#"{"alg":"none","typ":"JWT"}"#));
    assert!(looks_like_jwt(&none));
    assert_eq!(verify(&verifier, &none), Err(JwtError::Malformed));
    // HS256 "signed" with the RSA public key as the secret, as either DER or the JWK's text.
    for secret in [public_der.clone(), rsa.jwk.to_string().into_bytes()] {
        let forged = TestKey {
            alg: Algorithm::HS256,
            kid: "r1".to_owned(),
            encoding: EncodingKey::from_secret(&secret),
            jwk: Value::Null,
        };
        assert_eq!(
            verify(&verifier, &sign(&forged, &claims("acme", "user:7"))),
            Err(JwtError::Algorithm("HS256".to_owned()))
        );
    }
    // A JWKS cannot be combined with HS256, and `oct` keys in a JWKS are never used.
    let err = JwtVerifier::load(
        &config(&dir, &[&rsa], &["RS256", "HS256"]),
        &TlsClient::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("HS256 needs a secret"), "{err}");
    let oct = TestKey {
        alg: Algorithm::HS256,
        kid: "o1".to_owned(),
        encoding: EncodingKey::from_secret(b"s"),
        jwk: json!({ "kty": "oct", "kid": "o1", "k": B64.encode(b"s") }),
    };
    let err = JwtVerifier::load(&config(&dir, &[&oct], &["RS256"]), &TlsClient::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("no key usable"), "{err}");
    // A key whose JWK names another alg is not used for this one.
    let mut es_named = ec_key("e1");
    es_named.jwk["alg"] = json!("ES384");
    let verifier = JwtVerifier::load(
        &config(&dir, &[&rsa, &es_named], &["RS256", "ES256"]),
        &TlsClient::default(),
    )
    .unwrap();
    assert_eq!(
        verify(&verifier, &sign(&es_named, &claims("acme", "u"))),
        Err(JwtError::UnknownKey(Some("e1".to_owned())))
    );
}

#[test]
fn an_hs256_secret_and_the_tenant_fallback() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("secret"),
        "an-hmac-secret-of-32-bytes-or-so\n",
    )
    .unwrap();
    let mut cfg = config(&dir, &[], &["HS256"]);
    cfg.jwks_file = None;
    cfg.secret_file = Some(dir.path().join("secret"));
    cfg.principal_claim = "client_id".to_owned();
    let key = TestKey {
        alg: Algorithm::HS256,
        kid: "ignored".to_owned(),
        encoding: EncodingKey::from_secret(b"an-hmac-secret-of-32-bytes-or-so"),
        jwk: Value::Null,
    };
    let mut c = claims("acme", "user:7");
    c["client_id"] = json!("agent:bot");
    let strict = JwtVerifier::load(&cfg, &TlsClient::default()).unwrap();
    assert_eq!(
        verify(&strict, &sign(&key, &c)),
        Ok(("acme".to_owned(), "agent:bot".to_owned()))
    );
    c.as_object_mut().unwrap().remove("tenant");
    assert_eq!(
        verify(&strict, &sign(&key, &c)),
        Err(JwtError::MissingClaim("tenant".to_owned()))
    );
    cfg.tenant = Some("default".to_owned());
    let fallback = JwtVerifier::load(&cfg, &TlsClient::default()).unwrap();
    assert_eq!(
        verify(&fallback, &sign(&key, &c)),
        Ok(("default".to_owned(), "agent:bot".to_owned()))
    );
    let wrong = TestKey {
        encoding: EncodingKey::from_secret(b"another-secret"),
        ..key
    };
    assert_eq!(
        verify(&fallback, &sign(&wrong, &c)),
        invalid("the signature does not verify")
    );
}

#[test]
fn roles_and_groups_are_admitted_from_the_claims_the_operator_names() {
    let dir = tempfile::tempdir().unwrap();
    let key = ec_key("e1");
    let mut cfg = config(&dir, &[&key], &["ES256"]);
    let claims_of = |verifier: &JwtVerifier, extra: Value| {
        let mut c = claims("acme", "user:7");
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(verifier.verify(&sign(&key, &c)))
            .map(|caller| (caller.claims.roles, caller.claims.groups))
    };
    let verifier = JwtVerifier::load(&cfg, &TlsClient::default()).unwrap();
    let owned = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    // An array, a single string, and none at all.
    assert_eq!(
        claims_of(
            &verifier,
            json!({ "roles": ["refunds", "support"], "groups": "eu" })
        ),
        Ok((owned(&["refunds", "support"]), owned(&["eu"])))
    );
    assert_eq!(
        claims_of(&verifier, json!({})),
        Ok((Vec::new(), Vec::new()))
    );
    // A claim of another type refuses the token: roles silently dropped could deny, or (in a
    // `forbid ... unless`) allow, what the operator did not mean.
    for bad in [json!(7), json!(["refunds", 7]), json!({ "admin": true })] {
        assert_eq!(
            claims_of(&verifier, json!({ "roles": bad })),
            Err(JwtError::ClaimType("roles".to_owned())),
            "{bad}"
        );
    }
    // The operator names the claims (Auth0 namespaces them, Azure AD uses `roles`).
    cfg.roles_claim = "https://gatehouse.test/roles".to_owned();
    cfg.groups_claim = "teams".to_owned();
    let named = JwtVerifier::load(&cfg, &TlsClient::default()).unwrap();
    assert_eq!(
        claims_of(
            &named,
            json!({ "https://gatehouse.test/roles": ["approver"], "teams": ["ops"], "roles": ["ignored"] })
        ),
        Ok((owned(&["approver"]), owned(&["ops"])))
    );
}

#[test]
fn bad_tables_fail_the_load_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let (rsa, _) = rsa_key("r1");
    let err = |cfg: &JwtConfig| {
        JwtVerifier::load(cfg, &TlsClient::default())
            .unwrap_err()
            .to_string()
    };
    assert!(err(&config(&dir, &[&rsa], &[])).contains("`algorithms` is empty"));
    assert!(err(&config(&dir, &[&rsa], &["RS512"])).contains("algorithm `RS512` is not supported"));
    let mut two = config(&dir, &[&rsa], &["RS256"]);
    two.jwks_url = Some("https://idp.test/jwks".to_owned());
    assert!(err(&two).contains("set exactly one key source"));
    for bad in [
        "http://idp.test/jwks",
        "ftp://127.0.0.1/jwks",
        "https://u:p@idp.test/jwks",
    ] {
        let mut cfg = config(&dir, &[&rsa], &["RS256"]);
        cfg.jwks_file = None;
        cfg.jwks_url = Some(bad.to_owned());
        assert!(err(&cfg).contains("must be `https://host/path`"), "{bad}");
    }
    for good in [
        "https://idp.test/jwks",
        "http://127.0.0.1:9/jwks",
        "http://localhost/jwks",
        "http://[::1]/jwks",
    ] {
        let mut cfg = config(&dir, &[&rsa], &["RS256"]);
        cfg.jwks_file = None;
        cfg.jwks_url = Some(good.to_owned());
        assert!(
            JwtVerifier::load(&cfg, &TlsClient::default()).is_ok(),
            "{good}"
        );
    }
}

#[test]
fn only_jwt_shaped_bearers_look_like_jwts() {
    assert!(!looks_like_jwt("key-acme"));
    assert!(!looks_like_jwt("a.b.c"));
    assert!(!looks_like_jwt(&format!(
        "{}.b.c.d",
        B64.encode(r#"{"alg":"RS256"}"#)
    )));
    assert!(!looks_like_jwt(&format!(
        "{}.b.c",
        B64.encode(r#"{"typ":"JWT"}"#)
    )));
    assert!(looks_like_jwt(&format!(
        "{}.b.c",
        B64.encode(r#"{"alg":"RS256"}"#)
    )));
}
