// The client against a running local stack. tests/tests/clients.rs starts one and runs this
// suite with PLATFORM_BASE_URL (…/api/v1), PLATFORM_API_KEY (a fresh workspace's admin key),
// PLATFORM_WORKSPACE_ID, PLATFORM_LIMITED_BASE_URL (the same stack where the read class
// admits one request, then one a second) and PLATFORM_APPROVER_TOKEN (an OAuth token of a
// member with the confirm scope). Without them the suite fails, unless PLATFORM_SKIP_STACK=1.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ApiError, Client } from "../dist/index.js";

const env = process.env;
const skip = env.PLATFORM_SKIP_STACK === "1";
const need = (name) => {
  if (!env[name]) throw new Error(`${name} is not set (run through tests/tests/clients.rs, or set PLATFORM_SKIP_STACK=1)`);
  return env[name];
};
const unique = () => Math.random().toString(36).slice(2, 10);

/** A fetch that records each request's method, URL and answer status, and can misbehave. */
function recordingFetch(misbehave) {
  const seen = [];
  const f = async (url, init) => {
    const entry = { method: init?.method ?? "GET", url: String(url), headers: new Headers(init?.headers) };
    seen.push(entry);
    const response = await fetch(url, init);
    entry.status = response.status;
    entry.answer = response.headers;
    if (misbehave?.(entry)) throw new TypeError("fetch failed: the connection was reset");
    return response;
  };
  return { fetch: f, seen };
}

test("a list is paged across 3 pages and iterated to the end", { skip }, async () => {
  const { fetch, seen } = recordingFetch();
  const client = new Client({ baseUrl: need("PLATFORM_BASE_URL"), apiKey: need("PLATFORM_API_KEY"), fetch });
  const label = `pages-${unique()}`;
  const ids = [];
  for (let i = 0; i < 7; i++) {
    const { data } = await client.contacts.create({ email: `${label}-${i}@example.org`, labels: [label] });
    ids.push(data.id);
  }
  const before = seen.length;
  const listed = [];
  for await (const contact of client.listAll("/contacts", { query: { label, limit: 3 } })) listed.push(contact.id);
  assert.equal(seen.length - before, 3, "three page requests");
  assert.deepEqual([...listed].sort(), [...ids].sort(), "every contact exactly once");
  assert.equal(new Set(listed).size, listed.length);
});

test("errors come back typed, with the request id of the answer", { skip }, async () => {
  const { fetch, seen } = recordingFetch();
  const client = new Client({ baseUrl: need("PLATFORM_BASE_URL"), apiKey: need("PLATFORM_API_KEY"), fetch });
  const missing = await client.contacts.get("ct_01JD8X4M7Q2V9K3R5T6W8Y0Z1A").catch((e) => e);
  assert.ok(missing instanceof ApiError, String(missing));
  assert.equal(missing.status, 404);
  assert.equal(missing.code, "NOT_FOUND");
  assert.equal(missing.requestId, seen.at(-1).answer.get("request-id"));
  const invalid = await client.contacts.create({ email: "not-an-email" }).catch((e) => e);
  assert.ok(invalid instanceof ApiError);
  assert.equal(invalid.status, 400);
  assert.equal(invalid.code, "VALIDATION_ERROR");
  assert.equal(invalid.details[0].field, "email");
  assert.equal(seen.filter((r) => r.method === "POST").length, 1, "a 400 is never retried");
});

test("a 429 is retried after Retry-After and succeeds", { skip }, async () => {
  const { fetch, seen } = recordingFetch();
  const client = new Client({ baseUrl: need("PLATFORM_LIMITED_BASE_URL"), apiKey: need("PLATFORM_API_KEY"), fetch });
  await client.GET("/workspaces/current");
  const started = Date.now();
  const { data } = await client.GET("/workspaces/current");
  assert.ok(data.id.startsWith("ws_"));
  assert.ok(Date.now() - started >= 900, `waited ${Date.now() - started} ms`);
  assert.deepEqual(seen.map((r) => r.status).slice(-2), [429, 200]);
  assert.equal(seen.at(-2).answer.get("retry-after"), "1");
  // Without retries the 429 is the caller's, with its Retry-After.
  const once = new Client({ baseUrl: need("PLATFORM_LIMITED_BASE_URL"), apiKey: need("PLATFORM_API_KEY"), maxRetries: 0 });
  const limited = await once.GET("/workspaces/current").catch((e) => e);
  assert.ok(limited instanceof ApiError);
  assert.equal(limited.code, "RATE_LIMITED");
  assert.equal(limited.retryAfter, 1);
});

test("a write whose answer was lost is retried with the same key and happens once", { skip }, async () => {
  let dropped = false;
  // The server processes the first POST; the client never hears its answer.
  const { fetch, seen } = recordingFetch((r) => r.method === "POST" && !dropped && (dropped = true));
  const client = new Client({ baseUrl: need("PLATFORM_BASE_URL"), apiKey: need("PLATFORM_API_KEY"), fetch });
  const email = `dropped-${unique()}@example.org`;
  const { data } = await client.contacts.create({ email });
  const posts = seen.filter((r) => r.method === "POST");
  assert.equal(posts.length, 2);
  assert.equal(posts[0].headers.get("idempotency-key"), posts[1].headers.get("idempotency-key"));
  assert.equal(posts[1].answer.get("idempotent-replayed"), "true");
  const found = await client.contacts.list({ q: email });
  assert.deepEqual(found.data.map((c) => c.id), [data.id], "one contact, not two");
});

test("a confirmable write waits for a person's confirmation of exactly that request", { skip }, async () => {
  const admin = new Client({ baseUrl: need("PLATFORM_BASE_URL"), apiKey: need("PLATFORM_API_KEY") });
  const { data: key } = await admin.POST("/workspaces/current/api-keys", {
    body: { name: `agent-${unique()}`, scopes: ["read", "write", "admin"], requires_confirmation: ["webhooks.create"] },
  });
  const agent = new Client({ baseUrl: need("PLATFORM_BASE_URL"), apiKey: key.secret });
  const body = { url: "http://127.0.0.1:9/hook", description: "agent's hook" };
  const idempotencyKey = `agent-hook-${unique()}`;
  const refused = await agent.webhooks.create(body, { idempotencyKey }).catch((e) => e);
  assert.ok(refused instanceof ApiError);
  assert.equal(refused.status, 428);
  assert.equal(refused.code, "CONFIRMATION_REQUIRED");
  const meta = refused.details[0].meta;
  assert.equal(meta.capability, "webhooks.create");
  assert.equal(meta.body_sha256, await agent.confirmations.bodySha256(body), "the client hashes the body it sends");
  const person = new Client({
    baseUrl: need("PLATFORM_BASE_URL"),
    accessToken: need("PLATFORM_APPROVER_TOKEN"),
    workspaceId: need("PLATFORM_WORKSPACE_ID"),
  });
  // The value the person approves is the approval request's; the token names its digest.
  const { data: asked } = await person.approvals.get(meta.approval_request_id);
  const { data: confirmation } = await person.confirmations.mint({
    capability: meta.capability,
    method: meta.method,
    path: meta.path,
    idempotency_key: idempotencyKey,
    body_sha256: meta.body_sha256,
    effect_digest: asked.effect_value.digest,
    preview_summary: "Create the agent's hook",
    approved_by: "the test",
    api_key_id: key.id,
  });
  const { data: endpoint } = await agent.webhooks.create(body, { idempotencyKey, confirmation: confirmation.confirmation_token });
  assert.ok(endpoint.id.startsWith("wh_"));
  const again = await agent.webhooks.create(body, { idempotencyKey: `${idempotencyKey}-2`, confirmation: confirmation.confirmation_token }).catch((e) => e);
  assert.equal(again.status, 428, "a token works once, for its own request");
});
