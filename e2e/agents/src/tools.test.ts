// The tool definitions of GET /v1/tools, put through each provider SDK's own checks: the
// generated types must be assignable to the SDKs' tool types (checked by tsc), and at run time
// OpenAI's strict-schema transform and parse-time check, and Anthropic's schema transform
// (what its SDK applies to a schema for strict tools and structured outputs), must take every
// tool as it is.
import assert from "node:assert/strict";
import test from "node:test";
import type Anthropic from "@anthropic-ai/sdk";
import { transformJSONSchema } from "@anthropic-ai/sdk/lib/transform-json-schema";
import type { ChatCompletionFunctionTool } from "openai/resources/chat/completions";
import type { FunctionTool } from "openai/resources/responses/responses";
import { validateInputTools } from "openai/lib/parser";
import { toStrictJsonSchema } from "openai/lib/transform";
import type { components } from "../generated/api.js";
import { getJSON } from "./gateway.js";

type Schemas = components["schemas"];

// Compile-time: what the document promises is what the SDKs take, without a cast.
const asChatTool = (t: Schemas["OpenAITool"]): ChatCompletionFunctionTool => t;
const asResponsesTool = (t: Schemas["OpenAIResponsesTool"]): FunctionTool => ({ ...t });
const asAnthropicTool = (t: Schemas["AnthropicTool"]): Anthropic.Messages.Tool => t;

const demoFunctions = ["tickets__create", "tickets__close", "tickets__get", "refunds__issue", "payments__payout", "email__send"];
const nameRE = /^[a-zA-Z0-9_-]{1,64}$/;

async function tools<T>(query: string): Promise<T[]> {
  return ((await getJSON("/v1/tools" + query)) as { tools: T[] }).tools;
}

test("OpenAI Chat Completions, strict: the SDK's strict transform changes nothing", async () => {
  const list = (await tools<Schemas["OpenAITool"]>("?format=openai&strict=true")).map(asChatTool);
  assert.deepEqual(list.map((t) => t.function.name), demoFunctions);
  validateInputTools(list); // the SDK's own check before it parses tool calls: every tool strict
  for (const t of list) {
    assert.match(t.function.name, nameRE);
    assert.equal(t.function.strict, true, t.function.name);
    const params = t.function.parameters as Record<string, unknown>;
    assert.deepEqual(toStrictJsonSchema(params), params, `${t.function.name}: already in strict form`);
  }
});

test("OpenAI Responses API, strict: flat shape, accepted as it is", async () => {
  const list = (await tools<Schemas["OpenAIResponsesTool"]>("?format=openai&api=responses&strict=true")).map(asResponsesTool);
  assert.deepEqual(list.map((t) => t.name), demoFunctions);
  for (const t of list) {
    assert.deepEqual(Object.keys(t).sort(), ["description", "name", "parameters", "strict", "type"]);
    assert.equal(t.type, "function");
    assert.equal(t.strict, true, t.name);
    assert.deepEqual(toStrictJsonSchema(t.parameters!), t.parameters, `${t.name}: already in strict form`);
  }
  const plain = await tools<Schemas["OpenAIResponsesTool"]>("?format=openai&api=responses");
  assert.ok(plain.every((t) => t.strict === false), "without strict=true, strict is false, never left to default");
});

test("OpenAI, not strict: the documented shape, which strict mode would refuse for optional params", async () => {
  const list = (await tools<Schemas["OpenAITool"]>("?format=openai")).map(asChatTool);
  for (const t of list) {
    assert.deepEqual(Object.keys(t.function).sort(), ["description", "name", "parameters"]);
  }
  const create = list.find((t) => t.function.name === "tickets__create")!;
  assert.throws(() => toStrictJsonSchema(create.function.parameters as Record<string, unknown>), /optional/);
});

test("Anthropic: the SDK's tool type and its strict-schema transform take every tool", async () => {
  const list = await tools<Schemas["AnthropicTool"]>("?format=anthropic");
  assert.deepEqual(list.map(asAnthropicTool).map((t) => t.name), demoFunctions);
  for (const t of list) {
    assert.match(t.name, nameRE);
    assert.equal(t.input_schema.type, "object");
    const strict = transformJSONSchema(t.input_schema);
    assert.equal(strict.type, "object");
    assert.equal(strict.additionalProperties, false);
  }
});
