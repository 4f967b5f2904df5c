// The local stack's OpenID provider: oidc-provider (the certified Node implementation) on a free
// port of 127.0.0.1, for the hosted approval pages' sign-in (authorization code + PKCE) in
// `make dev` and the browser test. Its access tokens are JWTs for the API's audience (resource
// indicators, RFC 8707), carrying the scopes read write admin confirm; the API caps them by
// the person's role, as it does any issuer's. The accounts are the ones given in OIDC_USERS,
// each signing in with its password on this provider's own login page.
//
// Environment: OIDC_PORT (0: any free port), OIDC_AUDIENCE, OIDC_CLIENT_ID, OIDC_REDIRECT_URIS
// (comma-separated), OIDC_USERS (JSON: [{"login", "password", "sub"}]), and optionally
// OIDC_ACCESS_TOKEN_KEY (a P-256 private key, PEM) with OIDC_ACCESS_TOKEN_KID: access tokens
// are then ES256 under that key (make dev signs with the development key the admin CLI's
// mint-token uses, so both verify against this provider's keys). Prints one JSON line
// {"issuer": ...} once it listens.

import Provider, { errors } from "oidc-provider";
import http from "node:http";
import crypto from "node:crypto";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const audience = env("OIDC_AUDIENCE");
const clientId = env("OIDC_CLIENT_ID");
const redirectUris = env("OIDC_REDIRECT_URIS").split(",");
const users = JSON.parse(env("OIDC_USERS"));
const RESOURCE_SCOPES = "read write admin confirm";

const server = http.createServer();
await new Promise((ok) => server.listen(Number(process.env.OIDC_PORT ?? 0), "127.0.0.1", ok));
const issuer = `http://127.0.0.1:${server.address().port}`;

// RS256 for ID tokens; access tokens use the given ES256 key when there is one.
const { privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
const keys = [{ ...privateKey.export({ format: "jwk" }), kid: "dev-oidc-1", use: "sig", alg: "RS256" }];
let accessTokenAlg = "RS256";
if (process.env.OIDC_ACCESS_TOKEN_KEY) {
  const ec = crypto.createPrivateKey(process.env.OIDC_ACCESS_TOKEN_KEY).export({ format: "jwk" });
  keys.push({ ...ec, kid: env("OIDC_ACCESS_TOKEN_KID"), use: "sig", alg: "ES256" });
  accessTokenAlg = "ES256";
}

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: clientId,
      token_endpoint_auth_method: "none",
      redirect_uris: redirectUris,
      grant_types: ["authorization_code"],
      response_types: ["code"],
    },
  ],
  jwks: { keys },
  pkce: { required: () => true },
  scopes: ["openid"],
  features: {
    devInteractions: { enabled: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => audience,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => {
        if (resource !== audience) throw new errors.InvalidTarget();
        return { scope: RESOURCE_SCOPES, audience, accessTokenTTL: 3600, accessTokenFormat: "jwt", jwt: { sign: { alg: accessTokenAlg } } };
      },
    },
  },
  // When the person signed in, on their access token: the API lets only a fresh sign-in at
  // the approval pages' client approve (docs/authority.md).
  extraTokenClaims: async (ctx) => {
    const authTime = ctx.oidc.entities.AuthorizationCode?.authTime;
    return authTime ? { auth_time: authTime } : undefined;
  },
  findAccount: (_ctx, id) => (users.some((u) => u.sub === id) ? { accountId: id, claims: () => ({ sub: id }) } : undefined),
  // The pages are this provider's only client, a first party: no consent screen.
  loadExistingGrant: async (ctx) => {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope("openid");
    grant.addResourceScope(audience, RESOURCE_SCOPES);
    await grant.save();
    return grant;
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  cookies: { keys: [crypto.randomBytes(32).toString("hex")] },
  ttl: { AccessToken: 3600, AuthorizationCode: 60, Session: 3600, Interaction: 600, Grant: 3600 },
});

const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const loginPage = (uid, problem) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · local OpenID provider</title></head>
<body><main><h1>Sign in</h1>
<p>The local stack's OpenID provider (oidc-provider). <code>make dev</code> prints the demo accounts.</p>
${problem ? `<p role="alert">${escape(problem)}</p>` : ""}
<form method="post" action="/interaction/${escape(uid)}/login">
<label for="login">Login</label> <input id="login" name="login" autocomplete="username" required>
<label for="password">Password</label> <input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form></main></body></html>`;

const readForm = (req) =>
  new Promise((ok, fail) => {
    let body = "";
    req.on("data", (c) => {
      body += c;
      if (body.length > 16384) {
        req.destroy();
        fail(new Error("form too large"));
      }
    });
    req.on("end", () => ok(new URLSearchParams(body)));
  });

const callback = provider.callback();
server.on("request", async (req, res) => {
  const m = new URL(req.url, issuer).pathname.match(/^\/interaction\/([A-Za-z0-9_-]+)(\/login)?$/);
  if (!m) return callback(req, res);
  try {
    const details = await provider.interactionDetails(req, res);
    if (m[2] && req.method === "POST") {
      const form = await readForm(req);
      const user = users.find((u) => u.login === form.get("login") && u.password === form.get("password"));
      if (!user) {
        res.writeHead(401, { "content-type": "text/html; charset=utf-8" });
        return res.end(loginPage(details.uid, "Unknown login or wrong password."));
      }
      return provider.interactionFinished(req, res, { login: { accountId: user.sub } }, { mergeWithLastSubmission: false });
    }
    if (details.prompt.name !== "login") {
      // Consent is granted by loadExistingGrant; anything else ends the interaction as is.
      return provider.interactionFinished(req, res, { consent: {} }, { mergeWithLastSubmission: true });
    }
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(loginPage(details.uid));
  } catch (e) {
    res.writeHead(400, { "content-type": "text/plain; charset=utf-8" });
    res.end(String(e?.message ?? e));
  }
});

console.log(JSON.stringify({ issuer }));
