//! `verify_iban`: the ISO 13616 check of an International Bank Account Number.
//!
//! Malformed input (characters other than letters and digits, the wrong shape, an impossible
//! length) is a `validation` error with a remediation, because the caller sent something that
//! is not an IBAN at all. A well-formed IBAN that fails the check is a successful result with
//! `valid: false`: that is the answer to the question asked.

use gatehouse_sdk::serde_json::json;
use gatehouse_sdk::{ToolError, ToolOutput, log};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct VerifyIbanArgs {
    /// Spaces are ignored and letters may be lower case.
    iban: String,
}

/// Shortest and longest IBAN any country uses (Norway, Saint Lucia).
const MIN_LEN: usize = 15;
const MAX_LEN: usize = 34;

/// IBAN lengths of the countries this adapter knows, from the SWIFT IBAN registry. An IBAN of
/// another country is checked by mod-97 only.
const COUNTRY_LENGTHS: &[(&str, usize)] = &[
    ("AD", 24),
    ("AE", 23),
    ("AT", 20),
    ("BE", 16),
    ("BG", 22),
    ("CH", 21),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DK", 18),
    ("EE", 20),
    ("ES", 24),
    ("FI", 18),
    ("FR", 27),
    ("GB", 22),
    ("GR", 27),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IS", 26),
    ("IT", 27),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("MC", 27),
    ("MT", 31),
    ("NL", 18),
    ("NO", 15),
    ("PL", 28),
    ("PT", 25),
    ("RO", 24),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
    ("TR", 26),
];

const REMEDIATION: &str = "send an IBAN: a two-letter country code, two check digits and up to \
30 letters or digits, e.g. `DE89 3704 0044 0532 0130 00`; spaces are ignored";

pub(crate) fn verify_iban(args: &VerifyIbanArgs) -> Result<ToolOutput, ToolError> {
    let iban = normalize(&args.iban)?;
    let country = &iban[..2];
    let expected_len = COUNTRY_LENGTHS
        .iter()
        .find(|(code, _)| *code == country)
        .map(|&(_, len)| len);
    let length_ok = expected_len.map(|len| len == iban.len());
    let checksum_ok = mod97(&iban) == 1;
    let valid = checksum_ok && length_ok != Some(false);
    // The number itself stays out of the log: it identifies an account.
    log::info(format!("verify_iban: country {country}, valid {valid}"));

    let verdict = if valid { "a valid" } else { "not a valid" };
    Ok(
        ToolOutput::text(format!("{} is {verdict} IBAN", grouped(&iban)))
            .with_structured(json!({
                "iban": iban,
                "valid": valid,
                "country": country,
                "check_digits": &iban[2..4],
                "checksum_ok": checksum_ok,
                "length_ok": length_ok,
            }))
            .with_evidence("iso13616:mod97"),
    )
}

/// Upper-cases, drops spaces and checks the shape: `CCdd` then letters or digits.
fn normalize(raw: &str) -> Result<String, ToolError> {
    let iban: String = raw
        .chars()
        .filter(|c| *c != ' ')
        .map(|c| c.to_ascii_uppercase())
        .collect();
    let malformed = |message: String| {
        ToolError::validation("MALFORMED_IBAN", message).with_remediation(REMEDIATION)
    };
    if let Some((i, c)) = iban
        .chars()
        .enumerate()
        .find(|(_, c)| !c.is_ascii_alphanumeric())
    {
        return Err(malformed(format!(
            "`{c}` at position {} is not a letter or digit",
            i + 1
        )));
    }
    if !(MIN_LEN..=MAX_LEN).contains(&iban.len()) {
        return Err(malformed(format!(
            "an IBAN has {MIN_LEN} to {MAX_LEN} characters, this one has {}",
            iban.len()
        )));
    }
    let bytes = iban.as_bytes();
    if !(bytes[0].is_ascii_uppercase() && bytes[1].is_ascii_uppercase()) {
        return Err(malformed(format!(
            "an IBAN starts with a two-letter country code, not `{}`",
            &iban[..2]
        )));
    }
    if !(bytes[2].is_ascii_digit() && bytes[3].is_ascii_digit()) {
        return Err(malformed(format!(
            "characters 3 and 4 of an IBAN are check digits, not `{}`",
            &iban[2..4]
        )));
    }
    Ok(iban)
}

/// The remainder mod 97 of the IBAN rearranged (first four characters moved to the end) with
/// letters replaced by 10..=35, computed digit by digit. `iban` is upper-case alphanumeric.
fn mod97(iban: &str) -> u32 {
    let (head, tail) = iban.split_at(4);
    tail.chars()
        .chain(head.chars())
        .fold(0, |rem, c| match c.to_digit(36) {
            Some(v) if v < 10 => (rem * 10 + v) % 97,
            Some(v) => (rem * 100 + v) % 97,
            None => rem,
        })
}

/// Groups of four, as IBANs are printed.
fn grouped(iban: &str) -> String {
    let chars: Vec<char> = iban.chars().collect();
    chars
        .chunks(4)
        .map(|chunk| chunk.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use gatehouse_sdk::{Content, ErrorKind};

    use super::*;

    fn verify(iban: &str) -> Result<ToolOutput, ToolError> {
        verify_iban(&VerifyIbanArgs { iban: iban.into() })
    }

    fn valid(iban: &str) -> bool {
        let out = verify(iban).unwrap_or_else(|e| panic!("{iban}: {e}"));
        out.structured.unwrap()["valid"].as_bool().unwrap()
    }

    #[test]
    fn accepts_valid_ibans() {
        for iban in [
            "DE89370400440532013000",
            "GB82 WEST 1234 5698 7654 32",
            "NL91ABNA0417164300",
            "FR1420041010050500013M02606",
            "BE68539007547034",
            "NO9386011117947",
            "ch9300762011623852957",
        ] {
            assert!(valid(iban), "{iban} should be valid");
        }
    }

    #[test]
    fn rejects_a_wrong_checksum_as_a_result_not_an_error() {
        let out = verify("DE89370400440532013001").unwrap();
        assert_eq!(
            out.structured,
            Some(json!({
                "iban": "DE89370400440532013001",
                "valid": false,
                "country": "DE",
                "check_digits": "89",
                "checksum_ok": false,
                "length_ok": true,
            }))
        );
        assert_eq!(
            out.content,
            [Content::Text(
                "DE89 3704 0044 0532 0130 01 is not a valid IBAN".into()
            )]
        );
        assert_eq!(out.evidence_refs, ["iso13616:mod97"]);
    }

    #[test]
    fn a_known_country_with_the_wrong_length_is_invalid() {
        // Valid mod-97, but a German IBAN has 22 characters.
        let out = verify("DE5137040044053201300").unwrap();
        let structured = out.structured.unwrap();
        assert_eq!(structured["length_ok"], json!(false));
        assert_eq!(structured["valid"], json!(false));
    }

    #[test]
    fn an_unknown_country_is_checked_by_mod97_only() {
        // Saint Lucia (LC) is not in the table; this example passes mod-97.
        let out = verify("LC55HEMM000100010012001200023015").unwrap();
        let structured = out.structured.unwrap();
        assert_eq!(structured["length_ok"], json!(null));
        assert_eq!(structured["valid"], json!(true));
    }

    #[test]
    fn evidence_keys_are_present() {
        let structured = verify("NL91ABNA0417164300").unwrap().structured.unwrap();
        for key in ["iban", "valid"] {
            assert!(structured.get(key).is_some(), "missing evidence key {key}");
        }
    }

    #[test]
    fn malformed_input_is_a_validation_error_with_remediation() {
        let cases = [
            (
                "DE89-3704-0044-0532-0130-00",
                "`-` at position 5 is not a letter or digit",
            ),
            ("DE89", "an IBAN has 15 to 34 characters, this one has 4"),
            ("", "an IBAN has 15 to 34 characters, this one has 0"),
            (
                "1289370400440532013000",
                "an IBAN starts with a two-letter country code, not `12`",
            ),
            (
                "DEX9370400440532013000",
                "characters 3 and 4 of an IBAN are check digits, not `X9`",
            ),
            (
                "DE89370400440532013000ü",
                "`ü` at position 23 is not a letter or digit",
            ),
        ];
        for (input, message) in cases {
            let err = verify(input).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Validation, "{input}");
            assert_eq!(err.code, "MALFORMED_IBAN", "{input}");
            assert_eq!(err.message, message, "{input}");
            assert_eq!(err.remediation.as_deref(), Some(REMEDIATION));
        }
    }
}
