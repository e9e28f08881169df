#!/usr/bin/env node
// An OAuth 2.0 authorization server for the e2e tests of per-user upstream OAuth: `oidc-provider`
// (pinned in package.json), a certified OpenID provider, on plain HTTP on loopback. The gateway
// signs users in here (authorization code + PKCE), refreshes and revokes their tokens, and the
// upstream (oauth_upstream.py) verifies the JWT access tokens against this issuer's JWKS.
//
// usage: node oidc_provider.mjs [--port P] [--client-id ID --client-secret S --redirect-uri URI...]
//          [--client ID:SECRET:REDIRECT]... [--auth-method client_secret_basic|client_secret_post]
//          [--access-ttl SECONDS] [--resource URL]... [--exchange-trust-secret S] [--log FILE]
//
//   --port P        0 (the default) picks a free port. Once ready, exactly one line goes to
//                   stdout: `listening http://127.0.0.1:PORT`; that URL is the issuer. All of
//                   oidc-provider's own notices and warnings go to stderr.
//   clients         --client-id/--client-secret/--redirect-uri (repeatable) make one client;
//                   --client ID:SECRET:REDIRECT (repeatable; split at the first two colons) adds
//                   more. Every client is confidential, uses --auth-method at the token and
//                   revocation endpoints (default client_secret_basic; oidc-provider allows one
//                   method per client), and has the grants authorization_code and refresh_token
//                   (and token exchange, below). A client whose redirect URIs are all
//                   http://127.0.0.1|localhost|[::1] is registered as `native`, so its redirect
//                   URI matches whatever port the caller's listener got (RFC 8252 §7.3); any
//                   other client is `web` (exact match).
//   --resource URL  the RFC 8707 resource indicators accepted (repeatable); none: any absolute URL.
//   --access-ttl S  access token lifetime in seconds (default 3600).
//   --log FILE      one JSON line appended per token endpoint and revocation endpoint answer:
//                     {"event":"token","grant_type":G,"sub":U,"client_id":C,"resource":R,
//                      "access_token_sha256_prefix":H,"refresh_token_sha256_prefix":H|null}
//                     {"event":"revocation","client_id":C,"token_kind":"RefreshToken"|...|null,
//                      "sub":U|null,"token_sha256_prefix":H}   (token_kind null: unknown token)
//                     {"event":"error","route":"token"|"revocation","grant_type":G|null,
//                      "client_id":C|null,"error":E,"error_description":D}  (D: the detail, e.g.
//                      "refresh token already used", where the answer only says "grant request
//                      is invalid")
//                   H is the first 12 hex digits of the token's SHA-256, as oauth_upstream.py logs.
//
// What a client gets:
//   - Authorization code flow only; PKCE S256 is required. Send `resource=<upstream MCP URL>` in
//     the authorization request: the access token is then a JWT (`typ: at+jwt`, RS256, `kid` in
//     `jwks_uri`) with iss = issuer, aud = that resource, sub = the login name, client_id, and
//     exp. At the token endpoint `resource` may be sent again or left out (the granted one is used).
//     Without `resource`, the access token is opaque, for userinfo only: the upstream refuses it.
//   - A refresh token with every authorization code grant, whatever the scope (no need for
//     `offline_access` or `prompt=consent`; `scope=openid` adds an ID token). Refresh tokens
//     rotate: each refresh returns a new one and consumes the old; presenting a consumed one
//     fails with invalid_grant and revokes the whole grant (reuse detection). Tokens do not end
//     with the browser session.
//   - Revocation (RFC 7009) at `revocation_endpoint`, with client auth. Revoking the refresh token
//     revokes the grant (every refresh token of that sign-in). A JWT access token cannot be
//     revoked: the endpoint answers 400 `unsupported_token_type`; it stays valid until exp.
//   - With --exchange-trust-secret S, token exchange (RFC 8693) at the token endpoint:
//     grant_type=urn:ietf:params:oauth:grant-type:token-exchange, subject_token=<a JWT signed
//     HS256 with S, with `sub` and `exp`>, subject_token_type=urn:ietf:params:oauth:token-type:jwt
//     (or :access_token / :id_token), resource=<URL> (or audience=<URL>), client authenticated as
//     above. Answer: a JWT access token as above with sub = the subject token's sub, and
//     issued_token_type=urn:ietf:params:oauth:token-type:access_token; no refresh token.
//
// Signing in (oidc-provider's development interactions; any login name and any password pass;
// every redirect is a 303, and a browser must keep the cookies: _interaction (path
// /interaction/UID), _interaction_resume (path /auth/UID), later _session (path /), each with a
// .sig twin):
//   GET  /auth?...              303 to /interaction/UID
//   GET  /interaction/UID       "Sign-in" page: <form method="post" action="/interaction/UID">
//                               with <input type="hidden" name="prompt" value="login">,
//                               <input required type="text" name="login">, <input required
//                               type="password" name="password">, <button type="submit"
//                               class="login login-submit">Sign-in</button>
//   POST /interaction/UID       prompt=login&login=NAME&password=ANY -> 303 to /auth/UID -> 303 to
//                               /interaction/UID2 (a new uid)
//   GET  /interaction/UID2      "Authorize" page: <form method="post" action="/interaction/UID2">
//                               with <input type="hidden" name="prompt" value="consent">,
//                               <button autofocus type="submit" class="login login-submit">Continue</button>
//   POST /interaction/UID2      prompt=consent -> 303 to /auth/UID2 -> 303 to REDIRECT?code=..&state=..&iss=..
//   Each page's <h1> is its title ("Sign-in", "Authorize"); each links "[ Cancel ]" to
//   /interaction/UID/abort (redirect with error=access_denied). The pages @import a Google
//   font: keep a headless browser offline (Chromium: --host-resolver-rules="MAP * ~NOTFOUND,
//   EXCLUDE 127.0.0.1"). The _session cookie keeps the browser signed in: a later request skips
//   the Sign-in page and reuses that user, so a second user needs fresh cookies (or
//   prompt=login). The Authorize page comes every time for a `native` client (oidc-provider's
//   rule); for a `web` client, only when something not yet granted is asked.
// Discovery: /.well-known/openid-configuration and (RFC 8414) /.well-known/oauth-authorization-server.
// Keys: one RSA key, made at start, kept in memory. State (grants, tokens) is in memory too.

import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { parseArgs } from 'node:util';

import { jwtVerify } from 'jose';
import { Provider, errors } from 'oidc-provider';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const SUBJECT_TOKEN_TYPES = ['jwt', 'access_token', 'id_token'].map((t) => `urn:ietf:params:oauth:token-type:${t}`);
const LOOPBACK = /^http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?\//;

const { values: opts } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    'client-id': { type: 'string' },
    'client-secret': { type: 'string' },
    'redirect-uri': { type: 'string', multiple: true, default: [] },
    client: { type: 'string', multiple: true, default: [] },
    'auth-method': { type: 'string', default: 'client_secret_basic' },
    'access-ttl': { type: 'string', default: '3600' },
    resource: { type: 'string', multiple: true, default: [] },
    'exchange-trust-secret': { type: 'string' },
    log: { type: 'string' },
  },
});

// oidc-provider prints its notices with console.info; stdout carries only the ready line.
console.info = console.error;

const sha256Prefix = (token) => crypto.createHash('sha256').update(token).digest('hex').slice(0, 12);
const log = (event) => opts.log && fs.appendFileSync(opts.log, `${JSON.stringify(event)}\n`);

const specs = opts.client.map((spec) => {
  const [id, secret, ...redirect] = spec.split(':');
  return { id, secret, redirects: [redirect.join(':')] };
});
if (opts['client-id']) {
  specs.unshift({ id: opts['client-id'], secret: opts['client-secret'], redirects: opts['redirect-uri'] });
}
if (!specs.length) throw new Error('no client: give --client-id/--client-secret/--redirect-uri or --client');
const grantTypes = ['authorization_code', 'refresh_token', ...(opts['exchange-trust-secret'] ? [TOKEN_EXCHANGE] : [])];
const clients = specs.map(({ id, secret, redirects }) => ({
  client_id: id,
  client_secret: secret,
  redirect_uris: redirects,
  application_type: redirects.every((uri) => LOOPBACK.test(uri)) ? 'native' : 'web',
  grant_types: grantTypes,
  response_types: ['code'],
  token_endpoint_auth_method: opts['auth-method'],
}));

// The Resource Server every accepted indicator names: JWT access tokens with aud = the indicator.
const resourceServer = (indicator) => {
  if (opts.resource.length && !opts.resource.includes(indicator)) throw new errors.InvalidTarget();
  return { scope: '', accessTokenFormat: 'jwt' };
};

// Listen first: the issuer needs the port.
const server = http.createServer();
await new Promise((resolve) => server.listen(Number(opts.port), '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: crypto.randomUUID(), alg: 'RS256', use: 'sig' };

const provider = new Provider(issuer, {
  clients,
  jwks: { keys: [signingKey] },
  cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
  // Any login name is an account whose sub is that name.
  findAccount: (ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  features: {
    devInteractions: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      getResourceServerInfo: (ctx, indicator) => resourceServer(indicator),
      // The token endpoint may omit `resource`: the one granted at authorization is used.
      useGrantedResource: () => true,
    },
  },
  responseTypes: ['code'],
  pkce: { required: () => true },
  issueRefreshToken: (ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: true,
  expiresWithSession: () => false,
  ttl: { AccessToken: Number(opts['access-ttl']) },
});

if (opts['exchange-trust-secret']) {
  const trust = new TextEncoder().encode(opts['exchange-trust-secret']);
  provider.registerGrantType(TOKEN_EXCHANGE, async (ctx) => {
    const { params, client } = ctx.oidc;
    if (!params.subject_token || !SUBJECT_TOKEN_TYPES.includes(params.subject_token_type)) {
      throw new errors.InvalidRequest('subject_token and a JWT subject_token_type are required');
    }
    const indicator = params.resource ?? params.audience;
    if (!indicator) throw new errors.InvalidTarget('resource or audience is required');
    let sub;
    try {
      ({ payload: { sub } } = await jwtVerify(params.subject_token, trust, {
        algorithms: ['HS256'], requiredClaims: ['sub', 'exp'],
      }));
    } catch (err) {
      throw new errors.InvalidGrant(`subject_token rejected: ${err.message}`);
    }
    const at = new provider.AccessToken({ accountId: sub, client, gty: 'token-exchange' });
    at.resourceServer = new provider.ResourceServer(indicator, resourceServer(indicator));
    ctx.oidc.entity('AccessToken', at);
    ctx.body = {
      access_token: await at.save(),
      issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      token_type: 'Bearer',
      expires_in: at.expiration,
    };
  }, ['subject_token', 'subject_token_type', 'resource', 'audience']);
}

// One log line per answer of the token and revocation endpoints: successes here, errors below.
provider.use(async (ctx, next) => {
  await next();
  const route = ctx.oidc?.route;
  if ((route !== 'token' && route !== 'revocation') || ctx.status !== 200) return;
  const { params, entities, client } = ctx.oidc;
  if (route === 'token') {
    log({
      event: 'token', grant_type: params.grant_type, sub: entities.AccessToken.accountId,
      client_id: client.clientId, resource: entities.AccessToken.aud ?? null,
      access_token_sha256_prefix: sha256Prefix(ctx.body.access_token),
      refresh_token_sha256_prefix: ctx.body.refresh_token ? sha256Prefix(ctx.body.refresh_token) : null,
    });
  } else {
    const token = entities.RefreshToken ?? entities.AccessToken ?? entities.ClientCredentials;
    log({
      event: 'revocation', client_id: client.clientId, token_kind: token?.kind ?? null,
      sub: token?.accountId ?? null, token_sha256_prefix: sha256Prefix(params.token),
    });
  }
});
for (const [eventName, route] of [['grant.error', 'token'], ['revocation.error', 'revocation']]) {
  provider.on(eventName, (ctx, err) => log({
    event: 'error', route, grant_type: ctx.oidc.params?.grant_type ?? null,
    client_id: ctx.oidc.client?.clientId ?? null, error: err.error,
    error_description: err.error_detail ?? err.error_description,
  }));
}

server.on('request', provider.callback());
console.log(`listening ${issuer}`);
