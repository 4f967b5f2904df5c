// A client built from today's contract reads an answer from a later one: enum values and fields
// it does not know come through as they are (docs/api.md, "Changes to version 1"). No stack needed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "../dist/index.js";

test("an older client reads new enum values and fields", async () => {
  const later = {
    data: {
      id: "ct_01JD8X4M7Q2V9K3R5T6W8Y0Z1A", object: "contact", email: "ada@example.org", status: "vip",
      email_status: "paused_for_review", labels: [], metadata: {}, custom_fields: {},
      created_at: "2026-11-28T10:00:00Z", updated_at: "2026-11-28T10:00:00Z", loyalty_tier: "gold",
    },
  };
  const fetch = async () =>
    new Response(JSON.stringify(later), { status: 200, headers: { "content-type": "application/json", "request-id": "req_1" } });
  const client = new Client({ baseUrl: "http://127.0.0.1:9/api/v1", apiKey: "wsp_test", fetch });
  const { data } = await client.contacts.get("ct_01JD8X4M7Q2V9K3R5T6W8Y0Z1A");
  assert.equal(data.status, "vip");
  assert.equal(data.email_status, "paused_for_review");
  assert.equal(data.loyalty_tier, "gold");
});
