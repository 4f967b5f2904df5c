// The shared webhook signature vectors: every vector verifies (with each of its secrets while
// a secret rotates), every must-reject case fails, and stale timestamps are refused.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { verifyWebhook, Client } from "../dist/index.js";

const file = new URL("../../../shared/tests/vectors/webhook-signatures.json", import.meta.url);
const { vectors, must_reject } = JSON.parse(readFileSync(file, "utf8"));
const secretsOf = (v) => v.secrets ?? [v.secret];
const headers = (v) => ({ "X-Service-Timestamp": v.timestamp, "X-Service-Signature": v.signature });

test("every vector verifies with each of its secrets", async () => {
  assert.ok(vectors.length >= 3);
  for (const v of vectors) {
    for (const secret of secretsOf(v)) {
      assert.equal(await verifyWebhook(secret, headers(v), v.body, { now: Number(v.timestamp) }), true, v.name);
      // The same as bytes, and through a Headers object with other casing.
      const h = new Headers({ "x-service-timestamp": v.timestamp, "x-service-signature": v.signature });
      assert.equal(await verifyWebhook(secret, h, new TextEncoder().encode(v.body), { now: Number(v.timestamp) }), true, v.name);
    }
  }
});

test("every must-reject case is rejected", async () => {
  assert.ok(must_reject.length >= 1);
  for (const v of must_reject) {
    for (const secret of secretsOf(v)) {
      assert.equal(await verifyWebhook(secret, headers(v), v.body, { now: Number(v.timestamp) }), false, v.name);
    }
  }
});

test("timestamps outside the tolerance are replays", async () => {
  const v = vectors[0];
  const now = Number(v.timestamp);
  const client = new Client({ apiKey: "wsp_x", baseUrl: "http://127.0.0.1:9/api/v1" });
  assert.equal(await client.webhooks.verify(v.secret, headers(v), v.body, { now: now + 300 }), true);
  assert.equal(await client.webhooks.verify(v.secret, headers(v), v.body, { now: now + 301 }), false);
  assert.equal(await client.webhooks.verify(v.secret, headers(v), v.body, { now: now - 301 }), false);
  assert.equal(await verifyWebhook(v.secret, { "x-service-signature": v.signature }, v.body, { now }), false, "no timestamp");
  assert.equal(await verifyWebhook("not-a-secret", headers(v), v.body, { now }), false, "no whsec_ prefix");
});
