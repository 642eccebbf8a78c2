// OpenAI Agents JS (@openai/agents) against the gateway's /mcp over Streamable HTTP, with the
// key supplied by the agent's runtime: the MCP server's toolMetaResolver puts a key derived from
// the run in _meta "idemgate/key", while the scripted model, as a real one would (operation_key
// is required in every write tool's schema), also fills operation_key, with a value of its own
// that differs on every call. The model calls tickets__create twice in one run (a model that
// repeats itself, or a turn replayed after a crash): one ticket, under the runtime's key, the
// second call answered from the ledger, and neither call refused.
//
// Run by run.sh on Node 22, one test file at a time (the test compares the sandbox's ticket
// count before and after).
import assert from "node:assert/strict";
import test from "node:test";
import {
  Agent, MCPServerStreamableHttp, run, setTracingDisabled, Usage,
  type MCPToolMetaContext, type Model, type ModelRequest, type ModelResponse, type StreamEvent,
} from "@openai/agents";
import { apiKey, baseUrl, newKey, ticketsCommitted, ticketsWithSubject } from "../gateway.js";

setTracingDisabled(true); // nothing leaves the machine: no traces exported to OpenAI

/** The run's own identity, which the runtime derives keys from. */
interface RunContext { runId: string }

/**
 * A model that answers from a script: one response per turn, in order. It records what each
 * request offered it, so that the test can check the tools it was given.
 */
class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = [];
  constructor(private readonly script: ModelResponse["output"][]) {}
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    const output = this.script[this.requests.length - 1];
    assert.ok(output, `turn ${this.requests.length} is not in the script`);
    return { usage: new Usage(), output, responseId: `resp-${this.requests.length}` };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<StreamEvent> {
    throw new Error("the scripted model does not stream; the test runs without streaming");
  }
}

test("OpenAI Agents JS: toolMetaResolver supplies the key, the model's operation_key differs: one ticket, no refusal", async (t) => {
  const runId = newKey("agents-run");
  const runtimeKey = `${runId}:tickets__create`;
  const modelKeys = [newKey("model-invented-1"), newKey("model-invented-2")];
  const subject = `Printer on fire (${runId})`;

  const resolved: MCPToolMetaContext[] = [];
  const server = new MCPServerStreamableHttp({
    name: "idemgate",
    url: new URL("/mcp", baseUrl).href,
    requestInit: { headers: { Authorization: `Bearer ${apiKey}` } },
    useStructuredContent: true, // the model (and this test) sees the operation the gateway answers
    // The runtime's key: the run's id and the tool's name, the same for every call of this tool
    // in this run, whatever the model writes in operation_key.
    // (The resolver is typed for any run context: this one is the RunContext given to run().)
    toolMetaResolver: (ctx: MCPToolMetaContext) => {
      resolved.push(ctx);
      return { "idemgate/key": `${(ctx.runContext.context as RunContext).runId}:${ctx.toolName}` };
    },
  });
  await server.connect();
  t.after(() => server.close());

  const call = (n: number) => ({
    type: "function_call" as const, callId: `call-${n}`, name: "tickets__create", status: "completed" as const,
    arguments: JSON.stringify({ subject, operation_key: modelKeys[n - 1] }),
  });
  const model = new ScriptedModel([
    [call(1)],
    [call(2)],
    [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Ticket opened." }] }],
  ]);
  const agent = new Agent<RunContext>({ name: "support", instructions: "Open tickets.", model, mcpServers: [server] });

  const before = await ticketsCommitted();
  const result = await run(agent, "The printer is on fire: open a ticket.", { context: { runId } });
  assert.equal(result.finalOutput, "Ticket opened.");

  // The model was offered the gateway's tools under names every provider takes.
  const offered = model.requests[0]!.tools.map((tl) => ("name" in tl ? tl.name : ""));
  assert.deepEqual([...offered].sort(),
    ["email__send", "payments__payout", "refunds__issue", "tickets__close", "tickets__create", "tickets__get"]);

  // Both calls went through the resolver with the model's own operation_key in their arguments.
  assert.deepEqual(resolved.map((r) => [r.toolName, r.arguments?.["operation_key"]]),
    [["tickets__create", modelKeys[0]], ["tickets__create", modelKeys[1]]]);

  // Neither call was refused; both answered the same operation, under the runtime's key.
  const outputs = result.newItems.filter((it) => it.type === "tool_call_output_item").map((it) => it.output);
  assert.equal(outputs.length, 2);
  const ops = outputs.map((out) => JSON.parse(String(out)) as { id: string; key: string; state: string; type?: string });
  for (const op of ops) {
    assert.equal(op.type, undefined, `a refusal is a problem with a type: ${JSON.stringify(op)}`);
    assert.equal(op.state, "SUCCEEDED", JSON.stringify(op));
    assert.equal(op.key, runtimeKey, "the runtime's key, not the model's");
  }
  assert.equal(ops[1]!.id, ops[0]!.id, "the second call is the first operation, replayed");

  // One effect: one ticket in the sandbox, one operation in the ledger, none under the model's keys.
  assert.equal(await ticketsCommitted() - before, 1, "the sandbox committed exactly one ticket during the run");
  const found = await ticketsWithSubject(subject);
  assert.equal(found.operations.length, 1, "one tickets.create operation with this subject");
  assert.equal(found.operations[0]!.key, runtimeKey);
  assert.equal(found.tickets[0]?.subject, subject, "the sandbox holds the ticket that operation created");
  for (const k of modelKeys) {
    const res = await fetch(`${baseUrl}/v1/operation-keys/${encodeURIComponent(k)}`, { headers: { Authorization: `Bearer ${apiKey}` } });
    assert.equal(res.status, 404, `no operation under the model's key ${k}`);
  }
});
