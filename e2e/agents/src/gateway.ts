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

/** The demo sandbox's count of tickets it has committed, across every caller. */
export async function ticketsCommitted(): Promise<number> {
  const res = await fetch(`${baseUrl}/sandbox/_stats`);
  assert.equal(res.status, 200, `GET /sandbox/_stats: ${res.status}`);
  const stats = (await res.json()) as { committed: Record<string, number> };
  return stats.committed["tickets"] ?? 0;
}

/** What the ledger and the sandbox hold for the tickets.create operations with this subject. */
export interface TicketsWithSubject {
  /** Every tickets.create operation (newest 500) whose params.subject is the subject. */
  operations: { id: string; key: string; state: string; params: Record<string, unknown> | null }[];
  /** For each operation, the sandbox's ticket created by it (null if the sandbox has none). */
  tickets: ({ id: string; subject: string } | null)[];
}

export async function ticketsWithSubject(subject: string): Promise<TicketsWithSubject> {
  const page = (await getJSON("/v1/operations?tool=tickets.create&limit=500")) as {
    operations: TicketsWithSubject["operations"];
  };
  const operations = page.operations.filter((op) => op.params?.["subject"] === subject);
  const tickets = await Promise.all(operations.map(async (op) => {
    const res = await fetch(`${baseUrl}/sandbox/tickets?reference=${encodeURIComponent(op.id)}`);
    if (res.status === 404) return null;
    assert.equal(res.status, 200, `GET /sandbox/tickets?reference=${op.id}: ${res.status}`);
    return (await res.json()) as { id: string; subject: string };
  }));
  return { operations, tickets };
}
