// What the daily-driver browser tests set up through the API: a deployed cluster of simulated
// nodes and services started on it.
import assert from "node:assert/strict";
import type { BerthProcess } from "./browser.ts";

export async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  ms = 30_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A cluster of `nodes` simulated nodes, Deployed. */
export async function simulatedCluster(berth: BerthProcess, name: string, nodes = 1): Promise<string> {
  const made = await berth.api("POST", "/api/infra/v1/nodecluster/", {
    name,
    region: "/api/infra/v1/region/digitalocean/nyc1/",
    node_type: "/api/infra/v1/nodetype/digitalocean/1gb/",
    target_num_nodes: nodes,
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  assert.equal((await berth.api("POST", `${made.body.resource_uri}deploy/`)).status, 202);
  await until(
    `cluster ${name} Deployed`,
    async () => (await berth.api("GET", made.body.resource_uri)).body.state === "Deployed",
    60_000,
  );
  return made.body.resource_uri as string;
}

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON.
type Json = any;

/** A service created and started; waits until it reaches `state` (Running unless said). */
export async function startedService(
  berth: BerthProcess,
  body: Record<string, unknown>,
  state = "Running",
): Promise<Json> {
  const made = await berth.api("POST", "/api/app/v1/service/", body);
  assert.equal(made.status, 201, JSON.stringify(made.body));
  assert.equal((await berth.api("POST", `${made.body.resource_uri}start/`)).status, 202);
  return until(`service ${String(body.name)} ${state}`, async () => {
    const s = (await berth.api("GET", made.body.resource_uri)).body;
    return s.state === state ? s : undefined;
  });
}

/** The containers of a service. */
export async function containersOf(berth: BerthProcess, serviceUri: string): Promise<Json[]> {
  return (await berth.api("GET", `/api/app/v1/container/?service=${encodeURIComponent(serviceUri)}`)).body
    .objects;
}
