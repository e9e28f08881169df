"""HTTP for adapters, over ``wasi:http/outgoing-handler``: every request passes the host's
egress gate (grants, credential injection, budgets). Blocking: one request at a time.

    from gatehouse_sdk import http
    response = http.get("https://api.example.com/orders/42")
    response.status, response.json()

A request that gets no response raises ``HttpError``, a ``ToolFailure``: let it propagate
and the caller sees the same codes as from a Rust adapter:

| wasi:http error code                        | code                  | kind          | retryable |
|---------------------------------------------|-----------------------|---------------|-----------|
| HttpRequestDenied (the gateway refused it)  | `EGRESS_DENIED`       | `unavailable` | no        |
| ConnectionTimeout, ...Timeout               | `UPSTREAM_TIMEOUT`    | `unavailable` | yes       |
| HttpRequestUriInvalid, HttpRequestMethodInvalid | `INVALID_REQUEST` | `validation`  | no        |
| TlsProtocolError, TlsCertificateError, ...  | `UPSTREAM_TLS_FAILED` | `upstream`    | no        |
| anything else                               | `UPSTREAM_FAILED`     | `upstream`    | yes       |

``retryable`` is true only where the same request can succeed later, as in the Rust SDK: the
gateway refuses a denied request again. A response of any status is returned, not raised;
``retryable_status(status)`` says whether an error status may clear on retry.
"""

import json as _json
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from componentize_py_types import Err, Ok

from gatehouse_sdk import ToolFailure
from wit_world.imports import outgoing_handler, wasi_http_types as wasi
from wit_world.imports.streams import StreamError_Closed

#: Largest chunk written to or read from a body stream at once (wasi:io caps a blocking write
#: at 4096 bytes).
_CHUNK = 4096


class HttpError(ToolFailure):
    """The request did not get a response: ``wasi_code`` names the wasi:http error-code case;
    the ``ToolFailure`` fields follow the table above."""

    def __init__(self, wasi_code: str, detail: str = "") -> None:
        self.wasi_code = wasi_code
        said = f"{wasi_code}{': ' + detail if detail else ''}"
        if wasi_code == "HttpRequestDenied":
            # The message does not repeat what the gateway refused: its audit log has the reason.
            super().__init__(
                "unavailable",
                "EGRESS_DENIED",
                "the gateway does not allow this request (destination, method or budget)",
                retryable=False,
                remediation="ask the operator to grant this destination, or use a URL it grants",
            )
        elif wasi_code.endswith("Timeout"):
            super().__init__("unavailable", "UPSTREAM_TIMEOUT", said, retryable=True)
        elif wasi_code in ("HttpRequestUriInvalid", "HttpRequestMethodInvalid"):
            super().__init__("validation", "INVALID_REQUEST", said)
        elif wasi_code.startswith("Tls"):
            super().__init__(
                "upstream",
                "UPSTREAM_TLS_FAILED",
                said,
                remediation="use the host name the certificate names, or ask the operator to trust its CA",
            )
        else:
            super().__init__("upstream", "UPSTREAM_FAILED", said, retryable=True)


def retryable_status(status: int) -> bool:
    """Whether an upstream answering ``status`` may answer differently later: 408, 425, 429
    and the 5xx statuses but 501 and 505 (the Rust SDK's ``http::retryable_status``)."""
    return status in (408, 425, 429) or (500 <= status < 600 and status not in (501, 505))


class Response:
    """A response, its body read whole."""

    def __init__(self, status: int, headers: List[Tuple[str, bytes]], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name: str) -> Optional[str]:
        """The first value of header ``name`` (case-insensitive), if any."""
        name = name.lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value.decode("latin-1")
        return None

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return _json.loads(self.body)


_METHODS = {
    "GET": wasi.Method_Get(),
    "HEAD": wasi.Method_Head(),
    "POST": wasi.Method_Post(),
    "PUT": wasi.Method_Put(),
    "DELETE": wasi.Method_Delete(),
    "PATCH": wasi.Method_Patch(),
    "OPTIONS": wasi.Method_Options(),
}


def request(
    method: str,
    url: str,
    headers: Optional[Dict[str, str]] = None,
    body: Optional[bytes] = None,
) -> Response:
    """Sends one request and reads the whole response."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise HttpError("HttpRequestUriInvalid", f"not an absolute http(s) URL: {url}")
    fields = wasi.Fields.from_list(
        [(k, v.encode("latin-1")) for k, v in (headers or {}).items()]
    )
    outgoing = wasi.OutgoingRequest(fields)
    outgoing.set_method(_METHODS.get(method.upper()) or wasi.Method_Other(method.upper()))
    outgoing.set_scheme(wasi.Scheme_Https() if parts.scheme == "https" else wasi.Scheme_Http())
    outgoing.set_authority(parts.netloc)
    outgoing.set_path_with_query((parts.path or "/") + (f"?{parts.query}" if parts.query else ""))

    outgoing_body = outgoing.body()
    future = _send(outgoing)
    stream = outgoing_body.write()
    data = body or b""
    try:
        for start in range(0, len(data), _CHUNK):
            stream.blocking_write_and_flush(data[start : start + _CHUNK])
    finally:
        stream.__exit__(None, None, None)
    wasi.OutgoingBody.finish(outgoing_body, None)
    return _read(_wait(future))


def get(url: str, headers: Optional[Dict[str, str]] = None) -> Response:
    return request("GET", url, headers)


def post_json(url: str, value: Any, headers: Optional[Dict[str, str]] = None) -> Response:
    """POSTs ``value`` as JSON. The host adds the call's ``Idempotency-Key`` to every
    non-safe request."""
    merged = {"content-type": "application/json", **(headers or {})}
    return request("POST", url, merged, _json.dumps(value).encode())


def _send(outgoing: "wasi.OutgoingRequest") -> "wasi.FutureIncomingResponse":
    try:
        return outgoing_handler.handle(outgoing, None)
    except Err as e:
        raise HttpError(type(e.value).__name__.removeprefix("ErrorCode_"), _detail(e.value))


def _wait(future: "wasi.FutureIncomingResponse") -> "wasi.IncomingResponse":
    while True:
        answer = future.get()
        if answer is None:
            future.subscribe().block()
            continue
        if isinstance(answer, Err):
            raise HttpError("InternalError", "the response was already taken")
        inner = answer.value
        if isinstance(inner, Ok):
            return inner.value
        error = inner.value
        raise HttpError(type(error).__name__.removeprefix("ErrorCode_"), _detail(error))


def _read(response: "wasi.IncomingResponse") -> Response:
    status = response.status()
    headers = response.headers().entries()
    incoming = response.consume()
    stream = incoming.stream()
    chunks = []
    while True:
        try:
            chunks.append(stream.blocking_read(64 * 1024))
        except Err as e:
            if isinstance(e.value, StreamError_Closed):
                break
            raise HttpError("HttpResponseIncomplete", "the response body broke off")
    stream.__exit__(None, None, None)
    wasi.IncomingBody.finish(incoming)
    return Response(status, headers, b"".join(chunks))


def _detail(error: Any) -> str:
    value = getattr(error, "value", None)
    return "" if value is None else str(value)
