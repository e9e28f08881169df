//! The gateway's own outbound HTTP requests (a JWKS fetch, an A2A webhook, and the agent card
//! `gatehouse import a2a` reads): one request over a connection the caller opened to an
//! address it checked, TLS for `https` with the host's trust roots, HTTP/1.1, no redirects
//! followed.

use gatehouse_host::TlsClient;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Sends `request` for `url` over `tcp` (TLS for an `https` URL, with `tls`'s trust roots and
/// the URL's host as the server name): the response, its body unread.
pub async fn send<B>(
    url: &url::Url,
    tcp: TcpStream,
    tls: &TlsClient,
    request: http::Request<B>,
) -> Result<http::Response<hyper::body::Incoming>, String>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if url.scheme() != "https" {
        return exchange(TokioIo::new(tcp), request).await;
    }
    let host = url
        .host_str()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_owned();
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host)
        .map_err(|e| format!("bad server name: {e}"))?;
    let stream = tls
        .connector()
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    exchange(TokioIo::new(stream), request).await
}

async fn exchange<T, B>(
    io: T,
    request: http::Request<B>,
) -> Result<http::Response<hyper::body::Incoming>, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())
}

/// A URL the gateway's own requests may go to: `https`, or `http` to a loopback host (a
/// service beside the gateway, a test's); no credentials in it. The error says so, naming
/// `raw`.
pub fn checked_url(raw: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(raw).map_err(|e| format!("`{raw}` is not a URL: {e}"))?;
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    let ok = match url.scheme() {
        "https" => url.host().is_some(),
        "http" => loopback,
        _ => false,
    };
    if !ok || !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "`{raw}` must be `https://host/path` (plain `http` only to a loopback host, no credentials)"
        ));
    }
    Ok(url)
}

/// A connection to `url`'s host and port (its scheme's default port if none), for [`send`]:
/// to what the host name resolves to, unchecked (the gateway's own requests go to places its
/// operator named).
pub async fn connect(url: &url::Url) -> Result<TcpStream, String> {
    let host = url
        .host_str()
        .ok_or("no host")?
        .trim_matches(['[', ']'])
        .to_owned();
    let port = url.port_or_known_default().ok_or("no port")?;
    TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))
}
