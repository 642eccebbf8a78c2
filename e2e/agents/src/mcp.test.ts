// The official MCP TypeScript SDK's client against the gateway's MCP endpoint (Streamable
// HTTP): list the tools, call one, replay it by operation_key. The SDK validates every
// structured result against the tool's outputSchema, refusals included.
import assert from "node:assert/strict";
import test from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { components } from "../generated/api.js";
import { apiKey, baseUrl, getJSON, newKey } from "./gateway.js";

type Operation = components["schemas"]["Operation"];
type Problem = components["schemas"]["Problem"];

async function connect(): Promise<Client> {
  const client = new Client({ name: "idemgate-ci", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", baseUrl), {
    requestInit: { headers: { Authorization: `Bearer ${apiKey}` } },
  }));
  return client;
}

test("MCP: list, call, replay by operation_key, a read without a key", async (t) => {
  const client = await connect();
  t.after(() => client.close());

  const byName = (a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name);
  const tools = (await client.listTools()).tools.sort(byName); // the order of a list means nothing
  // Listed under names every model provider takes; each tool's own name is its title.
  assert.deepEqual(tools.map((tl) => tl.name),
    ["email__send", "payments__payout", "refunds__issue", "tickets__close", "tickets__create", "tickets__get"]);
  assert.deepEqual(tools.map((tl) => tl.title),
    ["email.send", "payments.payout", "refunds.issue", "tickets.close", "tickets.create", "tickets.get"]);
  const rest = (await getJSON("/v1/tools?format=mcp")) as { tools: { name: string }[] };
  // On 2025-11-25, which this SDK speaks, tools/list also says each tool may be called as a
  // task (execution.taskSupport): a word of that revision, not of the tool.
  for (const tl of tools) assert.deepEqual(tl.execution, { taskSupport: "optional" }, tl.name);
  const withoutExecution = tools.map(({ execution: _, ...tl }) => tl);
  assert.deepEqual(rest.tools.sort(byName), withoutExecution, "GET /v1/tools?format=mcp says what tools/list says");
  for (const tl of tools) {
    assert.ok(tl.outputSchema, `${tl.name} has an outputSchema`);
    assert.ok("operation_key" in (tl.inputSchema.properties ?? {}), `${tl.name} takes operation_key`);
    assert.match(tl.name, /^[a-zA-Z0-9_-]{1,64}$/);
    assert.equal(tl.inputSchema.required?.includes("operation_key"), tl.title !== "tickets.get", tl.name);
    assert.equal(tl.annotations?.readOnlyHint, tl.title === "tickets.get", tl.name);
  }

  const key = newKey("mcp-create");
  const args = { subject: "Printer on fire", operation_key: key };
  const first = await client.callTool({ name: "tickets.create", arguments: args });
  assert.equal(first.isError, undefined, JSON.stringify(first.content));
  const op = first.structuredContent as Operation;
  assert.equal(op.state, "SUCCEEDED");
  assert.equal(op.key, key);
  assert.equal(first._meta?.["idemgate/replayed"], false);

  const again = await client.callTool({ name: "tickets.create", arguments: args });
  assert.equal(again._meta?.["idemgate/replayed"], true);
  assert.deepEqual(again.structuredContent, op, "the replay is the recorded operation");

  const read = await client.callTool({ name: "tickets.get", arguments: { ticket_id: op.downstream_ref } });
  assert.equal(read.isError, undefined, JSON.stringify(read.content));
  const got = read.structuredContent as Operation;
  assert.equal(got.tool, "tickets.get");
  assert.deepEqual((got.result as { id: string }).id, op.downstream_ref);
});

test("MCP: refusals are error results whose problem passes the SDK's output check", async (t) => {
  const client = await connect();
  t.after(() => client.close());
  await client.listTools(); // the SDK caches each tool's outputSchema validator

  const nonASCII = await client.callTool({ name: "tickets.create", arguments: { subject: "x", operation_key: "café" } });
  assert.equal(nonASCII.isError, true);
  const p = nonASCII.structuredContent as Problem;
  assert.equal(p.type, "/problems/idempotency-key-invalid");
  assert.match(p.detail, /non-ASCII/);

  const invalid = await client.callTool({ name: "tickets.create", arguments: { subject: 7, operation_key: newKey("bad") } });
  assert.equal(invalid.isError, true);
  assert.equal((invalid.structuredContent as Problem).type, "/problems/invalid-params");
});
