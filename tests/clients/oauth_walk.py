#!/usr/bin/env python3
"""A walk through per-user upstream OAuth by hand, with plain HTTP requests: what gatehouse's
OAuth client will have to do against oidc_provider.mjs and oauth_upstream.py, step by step, so
the requests and form fields can be read here. It starts both servers itself, asserts each
answer, and ends with `walk: N passed, 0 failed` (any failure raises).

usage: tests/clients/.venv/bin/python tests/clients/oauth_walk.py

The steps:
  discovery (OpenID and RFC 8414 metadata; the upstream's RFC 9728 metadata, and its 401)
  -> alice signs in: authorization request with PKCE S256 and `resource`, the login form, the
     consent form, the redirect with `code` -> code for tokens (client_secret_basic)
  -> the access token is a JWT for the resource; whoami and create_issue as alice over MCP
  -> bob signs in the same way in his own browser session: whoami says bob
  -> alice's token expires (--access-ttl 2): 401; refresh -> a new access and refresh token
  -> bob's first refresh token, used again after rotation: invalid_grant (grant revoked)
  -> revocation: alice's refresh token (then refreshing fails); her JWT access token
     (unsupported_token_type)
  -> token exchange: a JWT signed with the trust secret, sub=carol -> whoami says carol
  -> a second provider with `--client ID:SECRET:REDIRECT --auth-method client_secret_post`:
     sign in and redeem the code with the secret in the form body
  -> the provider's and the upstream's logs hold what happened
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlparse

import jwt
import requests

HERE = Path(__file__).resolve().parent
CLIENT_ID, CLIENT_SECRET = "gatehouse", "gatehouse-secret"
# Registered without a port: the provider lets a loopback redirect URI take any port (RFC 8252).
REDIRECT_REGISTERED = "http://127.0.0.1/oauth/callback"
REDIRECT_URI = "http://127.0.0.1:8123/oauth/callback"  # nobody listens: the walk reads Location
EXCHANGE_SECRET = "walk-exchange-secret-of-32-bytes-or-more"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

passed = 0


def ok(what: str) -> None:
    global passed
    passed += 1
    print(f"ok {passed}: {what}", flush=True)


def start(argv: list[str], processes: list[subprocess.Popen]) -> str:
    """Start a server and return the URL of its one `listening URL` line."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    processes.append(process)
    line = process.stdout.readline()
    assert line.startswith("listening "), f"{argv[0]}: {line!r}"
    return line.split()[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def follow(browser: requests.Session, response: requests.Response) -> requests.Response:
    """Follow redirects by hand until a page, or until the redirect to the client's callback."""
    while response.is_redirect:
        location = urljoin(response.url, response.headers["Location"])
        if location.startswith(REDIRECT_URI):
            return response
        response = browser.get(location, allow_redirects=False)
    response.raise_for_status()
    return response


def form(page: requests.Response, prompt: str) -> str:
    """The page's one form: check it is the `prompt` step and return its absolute action URL."""
    action = re.search(r'<form autocomplete="off" action="([^"]+)" method="post">', page.text)
    assert action, page.text
    assert f'<input type="hidden" name="prompt" value="{prompt}"/>' in page.text, page.text
    return urljoin(page.url, action.group(1))


def sign_in(meta: dict, user: str, resource: str, client_id: str = CLIENT_ID) -> tuple[str, str]:
    """A user signs in, as a browser would: returns (code, code_verifier)."""
    browser = requests.Session()  # the user's browser: its own cookies
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    state = secrets.token_urlsafe(16)
    authorize = browser.get(meta["authorization_endpoint"], allow_redirects=False, params={
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "response_type": "code",
        "scope": "openid",  # a refresh token comes back anyway; offline_access is not needed
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": resource,
    })
    login = follow(browser, authorize)  # GET /interaction/UID: the "Sign-in" page
    assert '<input required type="text" name="login"' in login.text
    assert '<input required type="password" name="password"' in login.text
    assert '<button type="submit" class="login login-submit">Sign-in</button>' in login.text
    consent = follow(browser, browser.post(form(login, "login"), allow_redirects=False, data={
        "prompt": "login", "login": user, "password": "any",
    }))  # POST /interaction/UID -> /auth/UID -> GET /interaction/UID2: the "Authorize" page
    assert '<button autofocus type="submit" class="login login-submit">Continue</button>' in consent.text
    callback = follow(browser, browser.post(form(consent, "consent"), allow_redirects=False, data={
        "prompt": "consent",
    }))  # POST /interaction/UID2 -> /auth/UID2 -> 303 to REDIRECT_URI?code=..&state=..&iss=..
    query = parse_qs(urlparse(callback.headers["Location"]).query)
    assert query["state"] == [state] and query["iss"] == [meta["issuer"]], query
    return query["code"][0], verifier


def token(meta: dict, data: dict, auth: tuple[str, str] | None = (CLIENT_ID, CLIENT_SECRET)) -> requests.Response:
    """A token endpoint request; client_secret_basic unless `auth` is None (then the body has it)."""
    return requests.post(meta["token_endpoint"], data=data, auth=auth)


def call(mcp: str, access_token: str | None, tool: str, arguments: dict | None = None) -> requests.Response:
    """initialize, then tools/call, each a POST of its own (the upstream is stateless)."""
    headers = dict(MCP_HEADERS)
    if access_token:
        headers["Authorization"] = f"Bearer {access_token}"
    init = requests.post(mcp, headers=headers, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "oauth_walk", "version": "1"},
        },
    })
    if init.status_code != 200:
        return init
    headers["MCP-Protocol-Version"] = init.json()["result"]["protocolVersion"]
    return requests.post(mcp, headers=headers, json={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments or {}},
    })


def text(answer: requests.Response) -> str:
    assert answer.status_code == 200, (answer.status_code, answer.text)
    result = answer.json()["result"]
    assert not result.get("isError"), result
    return result["content"][0]["text"]


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def walk(tmp: Path, processes: list[subprocess.Popen]) -> None:
    provider_log, upstream_log = tmp / "provider.jsonl", tmp / "upstream.jsonl"
    upstream_port = free_port()
    resource = f"http://127.0.0.1:{upstream_port}/mcp"
    issuer = start([
        "node", str(HERE / "oidc_provider.mjs"), "--port", "0",
        "--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET, "--redirect-uri", REDIRECT_REGISTERED,
        "--access-ttl", "2", "--resource", resource, "--exchange-trust-secret", EXCHANGE_SECRET,
        "--log", str(provider_log),
    ], processes)
    mcp = start([
        sys.executable, str(HERE / "oauth_upstream.py"), "--port", str(upstream_port),
        "--issuer", issuer, "--log", str(upstream_log),
    ], processes)
    assert mcp == resource

    meta = requests.get(f"{issuer}/.well-known/openid-configuration").json()
    assert meta["issuer"] == issuer and meta["code_challenge_methods_supported"] == ["S256"]
    assert TOKEN_EXCHANGE in meta["grant_types_supported"] and meta["revocation_endpoint"]
    assert requests.get(f"{issuer}/.well-known/oauth-authorization-server").json() == meta
    ok(f"discovery: {issuer}/.well-known/openid-configuration and oauth-authorization-server")

    prm = requests.get(f"http://127.0.0.1:{upstream_port}/.well-known/oauth-protected-resource/mcp").json()
    assert prm["resource"] == resource and prm["authorization_servers"] == [issuer], prm
    refused = call(mcp, None, "whoami")
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer "), refused
    ok(f"upstream: RFC 9728 metadata, and 401 without a token ({refused.headers['WWW-Authenticate']})")

    wrong = requests.get(meta["authorization_endpoint"], allow_redirects=False, params={
        "client_id": CLIENT_ID, "redirect_uri": REDIRECT_URI, "response_type": "code", "scope": "openid",
        "code_challenge": "x" * 43, "code_challenge_method": "S256", "resource": "http://127.0.0.1:1/other",
    })
    assert "error=invalid_target" in wrong.headers["Location"], wrong.headers
    ok("a resource other than --resource: invalid_target")

    code, verifier = sign_in(meta, "alice", resource)
    ok("alice signed in: login form, consent form, redirect with code, state and iss")

    answer = token(meta, {
        "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
        "code_verifier": verifier, "resource": resource,
    })
    assert answer.status_code == 200, answer.text
    alice = answer.json()
    assert alice["token_type"] == "Bearer" and alice["expires_in"] == 2 and alice["refresh_token"], alice
    keys = jwt.PyJWKClient(meta["jwks_uri"])
    claims = jwt.decode(alice["access_token"], keys.get_signing_key_from_jwt(alice["access_token"]),
                        algorithms=["RS256"], audience=resource, issuer=issuer)
    assert jwt.get_unverified_header(alice["access_token"])["typ"] == "at+jwt"
    assert claims["sub"] == "alice" and claims["client_id"] == CLIENT_ID, claims
    ok(f"code -> JWT access token (aud={claims['aud']}, sub=alice) and a refresh token")

    assert text(call(mcp, alice["access_token"], "whoami")) == "alice"
    assert text(call(mcp, alice["access_token"], "create_issue", {"title": "t"})) == "issue #1 for alice"
    ok("upstream: whoami and create_issue as alice")

    code, verifier = sign_in(meta, "bob", resource)
    bob = token(meta, {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
                       "code_verifier": verifier}).json()  # no `resource` here: the granted one is used
    assert text(call(mcp, bob["access_token"], "whoami")) == "bob"
    ok("bob signed in (no resource at the token endpoint): whoami says bob")

    time.sleep(3)
    expired = call(mcp, alice["access_token"], "whoami")
    assert expired.status_code == 401, expired.text
    ok("alice's access token expired: 401")

    answer = token(meta, {
        "grant_type": "refresh_token", "refresh_token": alice["refresh_token"], "resource": resource,
    })
    assert answer.status_code == 200, answer.text
    renewed = answer.json()
    assert renewed["refresh_token"] != alice["refresh_token"], "refresh tokens rotate"
    assert text(call(mcp, renewed["access_token"], "whoami")) == "alice"
    ok("refresh: a new access token (whoami says alice) and a new refresh token")

    token(meta, {"grant_type": "refresh_token", "refresh_token": bob["refresh_token"]}).raise_for_status()
    reused = token(meta, {"grant_type": "refresh_token", "refresh_token": bob["refresh_token"]})
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant", reused.text
    ok(f"a rotated refresh token used again: {reused.json()}")

    revoked = requests.post(meta["revocation_endpoint"], auth=(CLIENT_ID, CLIENT_SECRET), data={
        "token": renewed["refresh_token"], "token_type_hint": "refresh_token",
    })
    assert revoked.status_code == 200, revoked.text
    after = token(meta, {"grant_type": "refresh_token", "refresh_token": renewed["refresh_token"]})
    assert after.status_code == 400 and after.json()["error"] == "invalid_grant", after.text
    jwt_revocation = requests.post(meta["revocation_endpoint"], auth=(CLIENT_ID, CLIENT_SECRET), data={
        "token": renewed["access_token"], "token_type_hint": "access_token",
    })
    assert jwt_revocation.status_code == 400, jwt_revocation.text
    assert jwt_revocation.json()["error"] == "unsupported_token_type"
    ok("revocation: the refresh token is gone; a JWT access token cannot be revoked (unsupported_token_type)")

    subject = jwt.encode({"sub": "carol", "exp": int(time.time()) + 60}, EXCHANGE_SECRET, algorithm="HS256")
    answer = token(meta, {
        "grant_type": TOKEN_EXCHANGE, "subject_token": subject,
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt", "resource": resource,
    })
    assert answer.status_code == 200, answer.text
    exchanged = answer.json()
    assert exchanged["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    assert "refresh_token" not in exchanged
    assert text(call(mcp, exchanged["access_token"], "whoami")) == "carol"
    forged = jwt.encode({"sub": "mallory", "exp": int(time.time()) + 60}, "another-key-as-long-as-the-real-one",
                        algorithm="HS256")
    answer = token(meta, {"grant_type": TOKEN_EXCHANGE, "subject_token": forged,
                          "subject_token_type": "urn:ietf:params:oauth:token-type:jwt", "resource": resource})
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant", answer.text
    ok("token exchange: sub=carol -> whoami says carol; a subject token with another key: invalid_grant")

    post_issuer = start([
        "node", str(HERE / "oidc_provider.mjs"), "--client", f"posting:post-secret:{REDIRECT_REGISTERED}",
        "--auth-method", "client_secret_post",
    ], processes)
    post_meta = requests.get(f"{post_issuer}/.well-known/oauth-authorization-server").json()
    code, verifier = sign_in(post_meta, "dave", resource, client_id="posting")
    answer = token(post_meta, {
        "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
        "code_verifier": verifier, "client_id": "posting", "client_secret": "post-secret",
    }, auth=None)
    assert answer.status_code == 200 and answer.json()["refresh_token"], answer.text
    ok("client_secret_post (--client and --auth-method, on a second provider)")

    events = read_log(provider_log)
    grants = [(e["grant_type"], e["sub"]) for e in events if e["event"] == "token"]
    assert grants == [
        ("authorization_code", "alice"), ("authorization_code", "bob"), ("refresh_token", "alice"),
        ("refresh_token", "bob"), (TOKEN_EXCHANGE, "carol"),
    ], grants
    assert all(e["resource"] == resource for e in events if e["event"] == "token")
    revocations = [e for e in events if e["event"] == "revocation"]
    assert [(e["token_kind"], e["sub"]) for e in revocations] == [("RefreshToken", "alice")], revocations
    errors = [(e["route"], e["error"], e["error_description"]) for e in events if e["event"] == "error"]
    assert errors == [
        ("token", "invalid_grant", "refresh token already used"),
        ("token", "invalid_grant", "refresh token not found"),
        ("revocation", "unsupported_token_type",
         "Structured JWT Tokens cannot be revoked via the revocation_endpoint"),
        ("token", "invalid_grant", "subject_token rejected: signature verification failed"),
    ], errors
    assert not any(alice["access_token"] in line for line in provider_log.read_text().splitlines())
    calls = [(e["tool"], e["sub"]) for e in read_log(upstream_log) if e["event"] == "call"]
    assert calls == [("whoami", "alice"), ("create_issue", "alice"), ("whoami", "bob"),
                     ("whoami", "alice"), ("whoami", "carol")], calls
    reasons = [e["reason"] for e in read_log(upstream_log) if e["event"] == "refused"]
    assert reasons == ["missing", "expired"], reasons
    ok(f"logs: {len(events)} provider events, {len(calls)} upstream calls, refusals {reasons}")


def main() -> None:
    processes: list[subprocess.Popen] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            walk(Path(tmp), processes)
    finally:
        for process in processes:
            process.terminate()
            process.wait()
    print(f"walk: {passed} passed, 0 failed")


if __name__ == "__main__":
    main()
