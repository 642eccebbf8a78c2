// Where the live gateway is: .ci/run's agents step (run.sh) starts one and passes its address
// and the demo API key.
import assert from "node:assert/strict";

export const baseUrl = process.env.IDEMGATE_URL ?? "";
export const apiKey = process.env.IDEMGATE_API_KEY ?? "";
assert.ok(baseUrl && apiKey, "set IDEMGATE_URL and IDEMGATE_API_KEY (run.sh does)");

/** A key no earlier run used: the gateway's ledger may outlive one run of these checks. */
export function newKey(name: string): string {
  return `agents-${process.pid}-${Date.now()}:${name}`;
}

/** GET a path of the API with the API key, as JSON. */
export async function getJSON(path: string): Promise<unknown> {
  const res = await fetch(baseUrl + path, { headers: { Authorization: `Bearer ${apiKey}` } });
  assert.equal(res.status, 200, `GET ${path}: ${res.status} ${await res.clone().text()}`);
  return res.json();
}
