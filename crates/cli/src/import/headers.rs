//! `--header 'Name: [scheme ]${ENV}'`: a credential the upstream wants, bound to an
//! environment variable of the gateway. It becomes a credential slot in the manifest's egress
//! request and a `credentials` binding in the config snippet; the adapter never sees it.

use std::collections::BTreeMap;

use gatehouse_host::config::{CredentialConfig, GrantConfig};

use super::error::ImportError;

/// One parsed `--header`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderCredential {
    /// The credential slot's name, e.g. `authorization` or `x_api_key`.
    pub slot: String,
    /// The header name, lowercase, e.g. `authorization`.
    pub name: String,
    /// The text before the secret, e.g. `Bearer`.
    pub scheme: Option<String>,
    /// The environment variable holding the secret.
    pub env: String,
}

impl HeaderCredential {
    /// Parses `Name: [scheme ]${ENV}`.
    pub fn parse(text: &str) -> Result<Self, ImportError> {
        let problem = |problem: &str| ImportError::Header {
            header: text.to_owned(),
            problem: format!("{problem}; write it as 'Name: ${{ENV}}' or 'Name: Scheme ${{ENV}}'"),
        };
        let (name, value) = text
            .split_once(':')
            .ok_or_else(|| problem("no `:` between name and value"))?;
        let name = name.trim().to_ascii_lowercase();
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(problem(&format!("`{name}` is not a header name")));
        }
        let value = value.trim();
        let (scheme, env) = match value.rsplit_once(' ') {
            Some((scheme, env)) => (Some(scheme.trim().to_owned()), env),
            None => (None, value),
        };
        let env = env
            .strip_prefix("${")
            .and_then(|e| e.strip_suffix('}'))
            .filter(|e| !e.is_empty() && e.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .ok_or_else(|| {
                problem(
                    "the value must end in `${ENV}`, the environment variable holding the \
                     secret (a header with a fixed value is not a credential)",
                )
            })?;
        Ok(Self {
            // The slot is named for the header, with `-` as `_`.
            slot: name.replace('-', "_"),
            name,
            scheme,
            env: env.to_owned(),
        })
    }

    /// The header value to send now, with the secret read from the environment.
    pub fn value_now(&self) -> Result<String, ImportError> {
        let secret = std::env::var(&self.env).map_err(|_| ImportError::Header {
            header: self.name.clone(),
            problem: format!(
                "environment variable `{}` is not set; set it to the upstream's secret",
                self.env
            ),
        })?;
        Ok(match &self.scheme {
            Some(scheme) => format!("{scheme} {secret}"),
            None => secret,
        })
    }
}

/// Each header's name and its value now (secrets read from the environment).
pub fn values_now(headers: &[HeaderCredential]) -> Result<Vec<(String, String)>, ImportError> {
    headers
        .iter()
        .map(|h| Ok((h.name.clone(), h.value_now()?)))
        .collect()
}

/// The credential headers (name, value) the operator's grants bind for `adapter`, secrets
/// read from the environment or files as the gateway reads them: how `--check` and `serve`'s
/// start-up check reach an upstream as the adapter does.
pub fn from_grants(
    grants: &[GrantConfig],
    adapter: &str,
) -> Result<Vec<(String, String)>, ImportError> {
    let mut headers = Vec::new();
    for grant in grants.iter().filter(|g| g.adapter == adapter) {
        for (slot, binding) in &grant.credentials {
            let secret =
                gatehouse_core::secret::read(binding.env.as_deref(), binding.file.as_deref())
                    .map_err(|problem| ImportError::Header {
                        header: format!("credential `{slot}` of the grant for `{adapter}`"),
                        problem,
                    })?;
            let value = match &binding.scheme {
                Some(scheme) => format!("{scheme} {}", secret.expose()),
                None => secret.expose().to_owned(),
            };
            headers.push((binding.header.clone(), value));
        }
    }
    Ok(headers)
}

/// The `credentials` table of the egress grant: one binding per header, by slot.
pub fn bindings(headers: &[HeaderCredential]) -> BTreeMap<String, CredentialConfig> {
    headers
        .iter()
        .map(|h| {
            (
                h.slot.clone(),
                CredentialConfig {
                    env: Some(h.env.clone()),
                    file: None,
                    oauth: None,
                    header: h.name.clone(),
                    scheme: h.scheme.clone(),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_headers_with_and_without_a_scheme() {
        let bearer = HeaderCredential::parse("Authorization: Bearer ${UPSTREAM_TOKEN}").unwrap();
        assert_eq!(
            bearer,
            HeaderCredential {
                slot: "authorization".into(),
                name: "authorization".into(),
                scheme: Some("Bearer".into()),
                env: "UPSTREAM_TOKEN".into()
            }
        );
        let key = HeaderCredential::parse("X-Api-Key:${KEY}").unwrap();
        assert_eq!((key.slot.as_str(), key.scheme), ("x_api_key", None));
    }

    #[test]
    fn rejects_headers_without_an_environment_variable() {
        for (text, problem) in [
            ("Authorization Bearer ${T}", "no `:` between name and value"),
            ("Bad Name: ${T}", "`bad name` is not a header name"),
            ("X-Key: abc123", "the value must end in `${ENV}`"),
            ("X-Key: ${}", "the value must end in `${ENV}`"),
            ("X-Key: ${T}-suffix", "the value must end in `${ENV}`"),
        ] {
            let err = HeaderCredential::parse(text).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("--header `{text}`: {problem}")),
                "{text}: {err}"
            );
        }
    }
}
