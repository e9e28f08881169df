//! One authorization server as the broker uses it: its endpoints (configured, or read from its
//! metadata, RFC 8414 or OpenID Connect discovery, once) and the OAuth 2.0 client of the
//! `oauth2` crate over the gateway's own HTTP client ([`crate::outbound`]).

use std::time::Duration;

use bytes::Bytes;
use gatehouse_host::TlsClient;
use http_body_util::{BodyExt as _, Full, Limited};
use oauth2::basic::BasicClient;
use oauth2::{
    AuthType, AuthUrl, ClientId, ClientSecret, EndpointNotSet, EndpointSet, RedirectUrl, TokenUrl,
};
use serde::Deserialize;
use tokio::sync::OnceCell;

use super::config::{ClientAuth, ProviderConfig};
use crate::outbound::checked_url;

/// The most a provider's answer (metadata, token response) may hold.
const MAX_BODY: usize = 256 * 1024;
/// How long one request to a provider may take, connection included.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The `oauth2` client with the endpoints the broker sets.
pub type Client =
    BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// A provider's endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Endpoints {
    /// Where the user's browser is sent.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens are exchanged.
    pub token_endpoint: String,
    /// Where tokens are revoked, if anywhere.
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
}

/// A configured provider.
#[derive(Debug)]
pub struct Provider {
    /// Its config.
    pub config: ProviderConfig,
    secret: String,
    endpoints: OnceCell<Endpoints>,
}

impl Provider {
    /// Load phase: reads the client secret (an error names the variable or file). The
    /// endpoints are read when first needed.
    pub fn load(config: &ProviderConfig) -> Result<Self, String> {
        let problem = |p: String| format!("`[[oauth.provider]]` `{}`: {p}", config.id);
        checked_url(&config.issuer).map_err(problem)?;
        for url in [
            &config.authorization_endpoint,
            &config.token_endpoint,
            &config.revocation_endpoint,
        ]
        .into_iter()
        .flatten()
        {
            checked_url(url).map_err(problem)?;
        }
        let secret = gatehouse_core::secret::read(
            config.client_secret_env.as_deref(),
            config.client_secret_file.as_deref(),
        )
        .map_err(|p| problem(format!("client secret: {p}")))?;
        let endpoints = OnceCell::new();
        // A provider that only exchanges tokens sends no browser anywhere.
        let authorization =
            (config.authorization_endpoint.clone()).or_else(|| config.exchange.then(String::new));
        if let (Some(authorization), Some(token)) = (authorization, &config.token_endpoint) {
            let _ = endpoints.set(Endpoints {
                authorization_endpoint: authorization,
                token_endpoint: token.clone(),
                revocation_endpoint: config.revocation_endpoint.clone(),
            });
        }
        Ok(Self {
            config: config.clone(),
            secret: secret.expose().to_owned(),
            endpoints,
        })
    }

    /// The endpoints: as configured, else from the issuer's metadata (read once).
    pub async fn endpoints(&self, tls: &TlsClient) -> Result<&Endpoints, String> {
        self.endpoints
            .get_or_try_init(|| discover(&self.config.issuer, tls))
            .await
    }

    /// Revokes `token` (of kind `hint`) at `endpoint` (RFC 7009). Sent here rather than by
    /// the `oauth2` crate, which refuses a revocation endpoint that is not `https`; the
    /// gateway allows plain `http` to a loopback host, as for every other endpoint of a
    /// provider ([`crate::outbound::checked_url`]).
    pub async fn revoke(
        &self,
        tls: &TlsClient,
        endpoint: &str,
        token: &str,
        hint: &str,
    ) -> Result<(), String> {
        let request = self.form_post(endpoint, &[("token", token), ("token_type_hint", hint)])?;
        let response = send(tls, request).await?;
        if response.status().is_success() {
            return Ok(());
        }
        Err(format!(
            "the revocation endpoint answered {}: {}",
            response.status(),
            said(response.body())
        ))
    }

    /// Exchanges `subject` (a token of `subject_type`) for an access token at the token
    /// endpoint (RFC 8693): for this provider's `resource` and `scopes`, as this client. The
    /// `oauth2` crate has no token exchange.
    pub async fn exchange(
        &self,
        tls: &TlsClient,
        endpoint: &str,
        subject: &str,
    ) -> Result<Exchanged, ExchangeError> {
        let scope = self.config.scopes.join(" ");
        let mut pairs = vec![
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ),
            ("subject_token", subject),
            (
                "subject_token_type",
                self.config.subject_token_type.as_str(),
            ),
            (
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            ),
        ];
        if let Some(resource) = &self.config.resource {
            pairs.push(("resource", resource));
        }
        if !scope.is_empty() {
            pairs.push(("scope", &scope));
        }
        let request = self
            .form_post(endpoint, &pairs)
            .map_err(ExchangeError::Unavailable)?;
        let response = send(tls, request)
            .await
            .map_err(ExchangeError::Unavailable)?;
        if response.status().is_success() {
            return serde_json::from_slice(response.body()).map_err(|e| {
                ExchangeError::Unavailable(format!("its answer does not read as a token: {e}"))
            });
        }
        // RFC 6749, section 5.2: a refusal names its error; `invalid_grant` and
        // `invalid_request` are about the subject token.
        let error: Option<String> = serde_json::from_slice::<serde_json::Value>(response.body())
            .ok()
            .and_then(|body| body["error"].as_str().map(str::to_owned));
        match error.as_deref() {
            Some(code @ ("invalid_grant" | "invalid_request" | "invalid_target")) => {
                Err(ExchangeError::Refused(code.to_owned()))
            }
            _ => Err(ExchangeError::Unavailable(format!(
                "the token endpoint answered {}: {}",
                response.status(),
                said(response.body())
            ))),
        }
    }

    /// A form POST to `endpoint` with `pairs` and the client's authentication (HTTP Basic,
    /// each part form-encoded first as RFC 6749's section 2.3.1 says, or in the form).
    fn form_post(
        &self,
        endpoint: &str,
        pairs: &[(&str, &str)],
    ) -> Result<http::Request<Vec<u8>>, String> {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.extend_pairs(pairs);
        let mut request = http::Request::post(endpoint)
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(http::header::ACCEPT, "application/json");
        match self.config.client_auth {
            ClientAuth::Basic => {
                use base64::Engine as _;
                let encode = |part: &str| {
                    url::form_urlencoded::byte_serialize(part.as_bytes()).collect::<String>()
                };
                let credentials = format!(
                    "{}:{}",
                    encode(&self.config.client_id),
                    encode(&self.secret)
                );
                let basic = base64::engine::general_purpose::STANDARD.encode(credentials);
                request = request.header(http::header::AUTHORIZATION, format!("Basic {basic}"));
            }
            ClientAuth::Post => {
                form.append_pair("client_id", &self.config.client_id)
                    .append_pair("client_secret", &self.secret);
            }
        }
        request
            .body(form.finish().into_bytes())
            .map_err(|e| e.to_string())
    }

    /// The `oauth2` client for these endpoints, redirecting to `redirect`.
    pub fn client(&self, endpoints: &Endpoints, redirect: &str) -> Result<Client, String> {
        let bad = |what: &str, e: url::ParseError| format!("{what} is not a URL: {e}");
        Ok(
            BasicClient::new(ClientId::new(self.config.client_id.clone()))
                .set_client_secret(ClientSecret::new(self.secret.clone()))
                .set_auth_type(match self.config.client_auth {
                    ClientAuth::Basic => AuthType::BasicAuth,
                    ClientAuth::Post => AuthType::RequestBody,
                })
                .set_auth_uri(
                    AuthUrl::new(endpoints.authorization_endpoint.clone())
                        .map_err(|e| bad("the authorization endpoint", e))?,
                )
                .set_token_uri(
                    TokenUrl::new(endpoints.token_endpoint.clone())
                        .map_err(|e| bad("the token endpoint", e))?,
                )
                .set_redirect_uri(
                    RedirectUrl::new(redirect.to_owned()).map_err(|e| bad("the callback", e))?,
                ),
        )
    }
}

/// The issuer's metadata: RFC 8414's well-known path (inserted before the issuer's path),
/// else OpenID Connect discovery's (appended); its `issuer` must be the one configured (RFC
/// 8414, section 3.3).
async fn discover(issuer: &str, tls: &TlsClient) -> Result<Endpoints, String> {
    #[derive(Deserialize)]
    struct Metadata {
        issuer: String,
        #[serde(flatten)]
        endpoints: Endpoints,
    }
    let url = checked_url(issuer)?;
    let path = url.path().trim_end_matches('/');
    let origin = url.origin().ascii_serialization();
    let mut refusals = Vec::new();
    for candidate in [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ] {
        let request = http::Request::get(&candidate)
            .header(http::header::ACCEPT, "application/json")
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        match send(tls, request).await {
            Ok(response) if response.status().is_success() => {
                let metadata: Metadata = serde_json::from_slice(response.body())
                    .map_err(|e| format!("the metadata at {candidate} does not parse: {e}"))?;
                if metadata.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
                    return Err(format!(
                        "the metadata at {candidate} names issuer `{}`, not `{issuer}`",
                        metadata.issuer
                    ));
                }
                checked_url(&metadata.endpoints.authorization_endpoint)?;
                checked_url(&metadata.endpoints.token_endpoint)?;
                return Ok(metadata.endpoints);
            }
            Ok(response) => refusals.push(format!("{candidate}: {}", response.status())),
            Err(e) => refusals.push(format!("{candidate}: {e}")),
        }
    }
    Err(format!(
        "no metadata for issuer `{issuer}` ({}); configure `authorization_endpoint` and `token_endpoint`",
        refusals.join("; ")
    ))
}

/// A token exchange's answer (RFC 8693, section 2.2.1).
#[derive(Debug, Deserialize)]
pub struct Exchanged {
    /// The token issued.
    pub access_token: String,
    /// Its lifetime in seconds, if the provider said.
    #[serde(default)]
    pub expires_in: Option<u64>,
    /// The scopes granted, if the provider said.
    #[serde(default)]
    pub scope: Option<String>,
}

/// Why a token exchange gave no token.
#[derive(Debug)]
pub enum ExchangeError {
    /// The provider refused the subject token (its error code).
    Refused(String),
    /// It could not be asked, or its answer was not usable.
    Unavailable(String),
}

/// The start of an answer's body, for a message.
fn said(body: &[u8]) -> String {
    String::from_utf8_lossy(body).chars().take(200).collect()
}

/// Why a request to a provider got no answer.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpFailure(String);

/// The `oauth2` crate's HTTP client: one request, over a connection of its own, within
/// [`TIMEOUT`], its answer within [`MAX_BODY`], no redirects followed.
pub fn http(
    tls: &TlsClient,
) -> impl Fn(
    oauth2::HttpRequest,
)
    -> std::pin::Pin<Box<dyn Future<Output = Result<oauth2::HttpResponse, HttpFailure>> + Send>> {
    let tls = tls.clone();
    move |request| {
        let tls = tls.clone();
        Box::pin(async move { send(&tls, request).await.map_err(HttpFailure) })
    }
}

async fn send(
    tls: &TlsClient,
    request: http::Request<Vec<u8>>,
) -> Result<http::Response<Vec<u8>>, String> {
    let exchange = async {
        let url = checked_url(&request.uri().to_string())?;
        let tcp = crate::outbound::connect(&url).await?;
        let (mut parts, body) = request.into_parts();
        parts.uri = url[url::Position::BeforePath..]
            .parse()
            .map_err(|e| format!("{e}"))?;
        if let Ok(authority) = http::HeaderValue::from_str(url.authority()) {
            parts.headers.insert(http::header::HOST, authority);
        }
        let request = http::Request::from_parts(parts, Full::new(Bytes::from(body)));
        let response = crate::outbound::send(&url, tcp, tls, request).await?;
        let (parts, body) = response.into_parts();
        let body = Limited::new(body, MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("cannot read the answer (at most {MAX_BODY} bytes): {e}"))?
            .to_bytes();
        Ok::<_, String>(http::Response::from_parts(parts, body.to_vec()))
    };
    tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| format!("no answer within {} s", TIMEOUT.as_secs()))?
}
