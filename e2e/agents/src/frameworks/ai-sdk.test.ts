// The Vercel AI SDK (ai 7 with @ai-sdk/mcp) against the gateway's /mcp, as a team would use it:
// the MCP client lists the gateway's tools and hands them, names as listed, to a model.
//
// 1. A scripted model (ai/test's MockLanguageModelV4) calls tickets__create once: the call goes
//    through the SDK's MCP client to the gateway and creates exactly one ticket.
// 2. The real request builders of @ai-sdk/openai (Responses and Chat Completions) and
//    @ai-sdk/anthropic run against a fetch of ours that records each request body and answers
//    a canned provider response (first a tool call of tickets__create, then text). Every tool
//    name in every recorded body matches ^[a-zA-Z0-9_-]{1,64}$, the pattern OpenAI and Anthropic
//    enforce (a dotted name is answered 400 there), and the canned tool call, parsed by the
//    provider package and executed by the AI SDK, creates exactly one ticket through the gateway.
//
// Run by run.sh on Node 22 (ai 7 requires it), one test file at a time: the tests compare the
// sandbox's ticket count before and after, which another test creating tickets at the same
// moment would change.
import assert from "node:assert/strict";
import test from "node:test";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createMCPClient } from "@ai-sdk/mcp";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, type LanguageModel, type ToolSet } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { apiKey, baseUrl, newKey, ticketsCommitted, ticketsWithSubject } from "../gateway.js";

const providerName = /^[a-zA-Z0-9_-]{1,64}$/;

async function gatewayTools(t: test.TestContext): Promise<ToolSet> {
  const mcp = await createMCPClient({
    transport: { type: "http", url: new URL("/mcp", baseUrl).href, headers: { Authorization: `Bearer ${apiKey}` } },
  });
  t.after(() => mcp.close());
  // These versions negotiate the stateless revision (server/discover), and the gateway
  // advertises the runtime-key capability there.
  assert.equal(mcp.initializeResult.protocolVersion, "2026-07-28");
  assert.deepEqual(mcp.initializeResult.capabilities.tools?.["idempotency"], { keyField: "idempotencyKey" });
  const tools = await mcp.tools();
  // The demo's six tools, under the names /mcp lists.
  assert.deepEqual(Object.keys(tools).sort(),
    ["email__send", "payments__payout", "refunds__issue", "tickets__close", "tickets__create", "tickets__get"]);
  return tools;
}

/**
 * Runs the model with the gateway's tools until it stops calling them, and checks that the
 * run made exactly one ticket with this subject, under this key, through the gateway.
 */
async function runAndCountOneTicket(model: LanguageModel, tools: ToolSet, subject: string, key: string) {
  const before = await ticketsCommitted();
  const result = await generateText({ model, tools, prompt: "The printer is on fire: open a ticket.", stopWhen: stepCountIs(4) });
  assert.equal(result.steps.length, 2, "a step with the tool call, then a step with the answer");
  const [call] = result.steps[0]!.toolResults;
  assert.ok(call, "the first step has a tool result");
  assert.equal(call.toolName, "tickets__create");
  const output = call.output as { isError?: boolean; structuredContent?: { state: string; key: string } };
  assert.notEqual(output.isError, true, JSON.stringify(output));
  assert.equal(output.structuredContent?.state, "SUCCEEDED", JSON.stringify(output));
  assert.equal(output.structuredContent?.key, key);
  assert.equal(result.text, "Ticket opened.");

  assert.equal(await ticketsCommitted() - before, 1, "the sandbox committed exactly one ticket during the run");
  const found = await ticketsWithSubject(subject);
  assert.equal(found.operations.length, 1, "one tickets.create operation with this subject");
  assert.equal(found.operations[0]!.state, "SUCCEEDED");
  assert.equal(found.operations[0]!.key, key);
  assert.equal(found.tickets[0]?.subject, subject, "the sandbox holds the ticket that operation created");
}

test("AI SDK, scripted model: the tool call reaches the gateway and creates one ticket", async (t) => {
  const tools = await gatewayTools(t);
  const key = newKey("ai-sdk-scripted");
  const subject = `Printer on fire (${key})`;
  const usage = {
    inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 5, text: 5, reasoning: undefined },
  };
  const model = new MockLanguageModelV4({
    doGenerate: [
      {
        content: [{ type: "tool-call", toolCallId: "call-1", toolName: "tickets__create",
          input: JSON.stringify({ subject, operation_key: key }) }],
        finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [],
      },
      { content: [{ type: "text", text: "Ticket opened." }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] },
    ],
  });
  await runAndCountOneTicket(model, tools, subject, key);

  // What the AI SDK handed the model: the gateway's tools under the names it listed.
  const offered = (model.doGenerateCalls[0]!.tools ?? []).map((tl) => tl.name);
  assert.deepEqual(offered.sort(), Object.keys(tools).sort());
  for (const name of offered) assert.match(name, providerName);
});

/** A fetch that records each request's JSON body and answers the next canned response. */
function capturingFetch(answers: unknown[]) {
  const bodies: Record<string, unknown>[] = [];
  const urls: string[] = [];
  const fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    urls.push(input instanceof Request ? input.url : String(input));
    bodies.push(JSON.parse(String(init?.body)) as Record<string, unknown>);
    const answer = answers[bodies.length - 1];
    assert.ok(answer, `request ${bodies.length} has no canned answer`);
    return new Response(JSON.stringify(answer), { status: 200, headers: { "content-type": "application/json" } });
  };
  return { fetch, bodies, urls };
}

type Body = Record<string, unknown>;
const list = (v: unknown): Body[] => (Array.isArray(v) ? (v as Body[]) : []);

// Where each API names tools, in the body of a request: the tool definitions and, in the
// history of the second request, the model's earlier tool call.
const namesIn = {
  openaiResponses: (b: Body) => ({
    defined: list(b["tools"]).map((tl) => tl["name"]),
    called: list(b["input"]).filter((it) => it["type"] === "function_call").map((it) => it["name"]),
  }),
  openaiChat: (b: Body) => ({
    defined: list(b["tools"]).map((tl) => (tl["function"] as Body)["name"]),
    called: list(b["messages"]).flatMap((m) => list(m["tool_calls"]).map((c) => (c["function"] as Body)["name"])),
  }),
  anthropic: (b: Body) => ({
    defined: list(b["tools"]).map((tl) => tl["name"]),
    called: list(b["messages"]).flatMap((m) => list(m["content"]).filter((c) => c["type"] === "tool_use").map((c) => c["name"])),
  }),
};

/** Checks the recorded bodies: two requests, every tool name the providers' pattern. */
function checkNames(bodies: Body[], names: (b: Body) => { defined: unknown[]; called: unknown[] }, tools: ToolSet) {
  assert.equal(bodies.length, 2, "one request for the tool call, one after its result");
  for (const [i, body] of bodies.entries()) {
    const { defined, called } = names(body);
    assert.deepEqual([...defined].sort(), Object.keys(tools).sort(), `request ${i + 1} defines the gateway's tools`);
    for (const name of [...defined, ...called]) {
      assert.equal(typeof name, "string");
      assert.match(name as string, providerName, `request ${i + 1}`);
    }
    assert.deepEqual(called, i === 0 ? [] : ["tickets__create"], `request ${i + 1}'s history of tool calls`);
  }
}

test("AI SDK + @ai-sdk/openai (Responses API): every tool name in the request bodies is one OpenAI accepts", async (t) => {
  const tools = await gatewayTools(t);
  const key = newKey("ai-sdk-openai-responses");
  const subject = `Printer on fire (${key})`;
  const usage = { input_tokens: 100, output_tokens: 20, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } };
  const rec = capturingFetch([
    { id: "resp_1", object: "response", created_at: 1767225600, model: "gpt-5", status: "completed",
      output: [{ type: "function_call", id: "fc_1", call_id: "call_1", name: "tickets__create", status: "completed",
        arguments: JSON.stringify({ subject, operation_key: key }) }], usage },
    { id: "resp_2", object: "response", created_at: 1767225601, model: "gpt-5", status: "completed",
      output: [{ type: "message", id: "msg_1", role: "assistant", status: "completed",
        content: [{ type: "output_text", text: "Ticket opened.", annotations: [] }] }], usage },
  ]);
  const openai = createOpenAI({ apiKey: "sk-not-used", fetch: rec.fetch });
  await runAndCountOneTicket(openai.responses("gpt-5"), tools, subject, key);
  assert.deepEqual(rec.urls, ["https://api.openai.com/v1/responses", "https://api.openai.com/v1/responses"]);
  checkNames(rec.bodies, namesIn.openaiResponses, tools);
});

test("AI SDK + @ai-sdk/openai (Chat Completions): every tool name in the request bodies is one OpenAI accepts", async (t) => {
  const tools = await gatewayTools(t);
  const key = newKey("ai-sdk-openai-chat");
  const subject = `Printer on fire (${key})`;
  const usage = { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 };
  const rec = capturingFetch([
    { id: "chatcmpl-1", object: "chat.completion", created: 1767225600, model: "gpt-5",
      choices: [{ index: 0, finish_reason: "tool_calls", message: { role: "assistant", content: null,
        tool_calls: [{ id: "call_1", type: "function",
          function: { name: "tickets__create", arguments: JSON.stringify({ subject, operation_key: key }) } }] } }], usage },
    { id: "chatcmpl-2", object: "chat.completion", created: 1767225601, model: "gpt-5",
      choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "Ticket opened." } }], usage },
  ]);
  const openai = createOpenAI({ apiKey: "sk-not-used", fetch: rec.fetch });
  await runAndCountOneTicket(openai.chat("gpt-5"), tools, subject, key);
  assert.deepEqual(rec.urls, ["https://api.openai.com/v1/chat/completions", "https://api.openai.com/v1/chat/completions"]);
  checkNames(rec.bodies, namesIn.openaiChat, tools);
});

test("AI SDK + @ai-sdk/anthropic (Messages API): every tool name in the request bodies is one Anthropic accepts", async (t) => {
  const tools = await gatewayTools(t);
  const key = newKey("ai-sdk-anthropic");
  const subject = `Printer on fire (${key})`;
  const usage = { input_tokens: 100, output_tokens: 20 };
  const rec = capturingFetch([
    { id: "msg_1", type: "message", role: "assistant", model: "claude-sonnet-4-5", stop_reason: "tool_use", stop_sequence: null,
      content: [{ type: "tool_use", id: "toolu_1", name: "tickets__create", input: { subject, operation_key: key } }], usage },
    { id: "msg_2", type: "message", role: "assistant", model: "claude-sonnet-4-5", stop_reason: "end_turn", stop_sequence: null,
      content: [{ type: "text", text: "Ticket opened." }], usage },
  ]);
  const anthropic = createAnthropic({ apiKey: "not-used", fetch: rec.fetch });
  await runAndCountOneTicket(anthropic("claude-sonnet-4-5"), tools, subject, key);
  assert.deepEqual(rec.urls, ["https://api.anthropic.com/v1/messages", "https://api.anthropic.com/v1/messages"]);
  checkNames(rec.bodies, namesIn.anthropic, tools);
});
