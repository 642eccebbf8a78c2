// A client generated from the OpenAPI document (openapi-typescript + openapi-fetch), as an
// agent developer would write it: it must compile without a cast and work against the gateway.
import assert from "node:assert/strict";
import test from "node:test";
import createClient from "openapi-fetch";
import type { components, paths } from "../generated/api.js";
import { apiKey, baseUrl, newKey } from "./gateway.js";

type Operation = components["schemas"]["Operation"];

const api = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${apiKey}` } });

async function createTicket(key: string, params: components["schemas"]["OperationRequest"]["params"]) {
  return api.POST("/v1/operations", {
    params: { header: { "Idempotency-Key": key, Prefer: "wait=10" } },
    body: { tool: "tickets.create", params, workflow_run_id: key, step_id: "create-ticket" },
  });
}

test("create, replay, look up by key, list and read events", async () => {
  const key = newKey("create-ticket");
  const first = await createTicket(key, { subject: "Printer on fire", priority: "high" });
  assert.equal(first.response.status, 201, JSON.stringify(first.error));
  const created: Operation = first.data!;
  assert.equal(created.state, "SUCCEEDED");
  assert.equal(created.key, key);

  const replay = await createTicket(key, { priority: "high", subject: "Printer on fire" });
  assert.equal(replay.response.status, 200);
  assert.equal(replay.response.headers.get("Idempotent-Replayed"), "true");
  assert.deepEqual(replay.data, created, "a replay answers the recorded operation, identical");

  const byKey = await api.GET("/v1/operation-keys/{key}", { params: { path: { key } } });
  assert.equal(byKey.response.status, 200);
  const found: Operation = byKey.data!; // typed as the operation: no cast
  assert.equal(found.id, created.id);

  const page = await api.GET("/v1/operations", { params: { query: { workflow_run_id: key, limit: 10 } } });
  assert.equal(page.response.status, 200);
  // The path also answers one operation when asked with ?key=: a page is told apart by its member.
  assert.ok(page.data && "operations" in page.data, "a page, not one operation: no key was given");
  const listed: Operation[] = page.data.operations; // narrowed, not cast
  assert.deepEqual(listed.map((op) => op.id), [created.id]);
  assert.equal(page.data.next_cursor, null);

  const events = await api.GET("/v1/operations/{id}/events", { params: { path: { id: created.id } } });
  assert.equal(events.response.status, 200);
  const types = events.data!.events.map((e) => e.type);
  assert.equal(types[0], "created");
  assert.ok(types.includes("attempt_finished"), types.join(","));
});

test("a key with a slash and a space is found by key", async () => {
  const key = newKey("tenant/a b");
  assert.equal((await createTicket(key, { subject: "Slash" })).response.status, 201);
  const byKey = await api.GET("/v1/operation-keys/{key}", { params: { path: { key } } });
  assert.equal(byKey.response.status, 200);
  assert.equal(byKey.data!.key, key);
});

test("a null for an optional param is the param left out: the same fingerprint, a replay", async () => {
  const key = newKey("strict-null");
  const first = await createTicket(key, { subject: "Null priority", priority: null, body: null });
  assert.equal(first.response.status, 201, JSON.stringify(first.error));
  assert.deepEqual(first.data!.params, { subject: "Null priority" });
  const again = await createTicket(key, { subject: "Null priority" });
  assert.equal(again.response.status, 200, JSON.stringify(again.error));
  assert.equal(again.data!.fingerprint, first.data!.fingerprint);
});

test("a refusal is a typed problem", async () => {
  const missing = await api.GET("/v1/operation-keys/{key}", { params: { path: { key: newKey("never-used") } } });
  assert.equal(missing.response.status, 404);
  assert.equal(missing.error!.type, "/problems/not-found");

  const bad = await createTicket(newKey("bad"), { subject: 42 });
  assert.equal(bad.response.status, 400);
  assert.equal(bad.error!.type, "/problems/invalid-params");
  assert.deepEqual(bad.error!.errors!.map((e) => e.pointer), ["/subject"]);
});
