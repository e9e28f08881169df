#!/usr/bin/env python3
"""An upstream MCP server that wants each user's own OAuth access token, on the official MCP Python
SDK (`mcp`, pinned in requirements.txt): the e2e tests of per-user upstream OAuth put gatehouse in
front of it, with oidc_provider.mjs as the authorization server.

usage: oauth_upstream.py [--port P] --issuer ISSUER [--resource URL] [--log FILE]

  --port P          0 (the default) picks a free port. Once ready, exactly one line goes to
                    stdout: `listening http://127.0.0.1:PORT/mcp`.
  --issuer ISSUER   the authorization server; its keys come from ISSUER/.well-known/
                    openid-configuration -> jwks_uri, fetched at the first token, cached, and
                    fetched again when a token names an unknown `kid`.
  --resource URL    the audience a token must carry (default: this server's own URL,
                    http://127.0.0.1:PORT/mcp).
  --log FILE        one JSON line appended per event:
                      {"event":"call","tool":T,"sub":U,"token_sha256_prefix":H}
                      {"event":"refused","reason":R,"detail":D}
                    R is missing (no Bearer token), expired, audience, issuer, signature,
                    unknown_key, or invalid (anything else). H is the first 12 hex digits of the
                    token's SHA-256, as oidc_provider.mjs logs.

Streamable HTTP at /mcp, stateless, JSON responses (no SSE, no session id). Every request to /mcp
needs `Authorization: Bearer <JWT>`, the JWT signed by a key of the issuer's JWKS, with iss =
ISSUER, aud = (or containing) the resource, and exp in the future; otherwise 401 with
`WWW-Authenticate: Bearer error="invalid_token", error_description=..., resource_metadata=...`.
The SDK also serves RFC 9728 protected resource metadata (resource, authorization_servers =
[ISSUER]) at /.well-known/oauth-protected-resource/mcp (the resource's path).

Tools: whoami() -> the token's sub; create_issue(title) -> "issue #N for SUB" (N counts from 1
across all users).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import socket
import urllib.request

import anyio
import jwt
import uvicorn

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp_types import ToolAnnotations

REASONS = {
    jwt.ExpiredSignatureError: "expired",
    jwt.InvalidAudienceError: "audience",
    jwt.InvalidIssuerError: "issuer",
    jwt.InvalidSignatureError: "signature",
    jwt.PyJWKClientError: "unknown_key",
}


def main() -> None:
    parser = argparse.ArgumentParser(description="an MCP server that wants per-user OAuth tokens")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--resource")
    parser.add_argument("--log")
    args = parser.parse_args()

    def log(**event: object) -> None:
        if args.log:
            with open(args.log, "a") as out:
                out.write(json.dumps(event) + "\n")

    def sha256_prefix(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()[:12]

    # Bind first: the default resource is this server's own URL.
    sock = socket.socket()
    sock.bind(("127.0.0.1", args.port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    resource = args.resource or url
    issuer = args.issuer.rstrip("/")

    jwks: list[jwt.PyJWKClient] = []  # made at the first token: the issuer may start after us

    def verify(token: str) -> dict:
        if not jwks:
            with urllib.request.urlopen(f"{issuer}/.well-known/openid-configuration") as answer:
                # The JWKS is cached, and fetched again at once (no cooldown) on an unknown kid.
                jwks.append(jwt.PyJWKClient(json.load(answer)["jwks_uri"], cooldown_duration=0))
        key = jwks[0].get_signing_key_from_jwt(token)
        return jwt.decode(
            token, key, algorithms=["RS256", "PS256", "ES256", "EdDSA"], audience=resource,
            issuer=issuer, options={"require": ["exp", "iss", "aud", "sub"]},
        )

    class Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            try:
                claims = await anyio.to_thread.run_sync(verify, token)
            except Exception as err:  # every failure is a refusal, logged with its reason
                reason = next((r for cls, r in REASONS.items() if isinstance(err, cls)), "invalid")
                log(event="refused", reason=reason, detail=f"{type(err).__name__}: {err}")
                return None
            return AccessToken(
                token=token, client_id=claims.get("client_id", ""), scopes=claims.get("scope", "").split(),
                expires_at=claims["exp"], resource=resource, subject=claims["sub"], claims=claims,
            )

    server = MCPServer(
        "oauth-upstream",
        log_level="WARNING",
        token_verifier=Verifier(),
        auth=AuthSettings(issuer_url=issuer, resource_server_url=resource, validate_token_resource=False),
    )
    issues = itertools.count(1)

    def caller(tool: str) -> str:
        token = get_access_token()
        log(event="call", tool=tool, sub=token.subject, token_sha256_prefix=sha256_prefix(token.token))
        return token.subject

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def whoami() -> str:
        """The signed-in user's subject (`sub`)."""
        return caller("whoami")

    # A write that destroys nothing: imported as an ordinary write (MCP assumes a tool without
    # annotations may destroy, and gatehouse gates those behind an approval).
    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def create_issue(title: str) -> str:
        """Create an issue as the signed-in user."""
        return f"issue #{next(issues)} for {caller('create_issue')}"

    app = server.streamable_http_app(stateless_http=True, json_response=True)

    # The SDK answers a request without a Bearer token before any verifier runs: log it here.
    async def logged(scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            header = dict(scope["headers"]).get(b"authorization", b"")
            if not header.lower().startswith(b"bearer "):
                log(event="refused", reason="missing", detail="no Bearer token")
        await app(scope, receive, send)

    sock.listen()
    print(f"listening {url}", flush=True)
    config = uvicorn.Config(logged, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
