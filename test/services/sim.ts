// Helpers for the services tests on simulated nodes: a harness whose simulated nodes run
// recording fake engines (what Berth asked each engine to create, and a gate that holds creations
// so a transitional state can be observed), clusters, services, actions and their logs.
import assert from "node:assert/strict";
import type {
  ContainerSpec,
  ContainerSummary,
  ContainerView,
  ListContainersOptions,
  RemoveContainerOptions,
  StopContainerOptions,
  StopOutcome,
} from "../../src/drivers/engine.ts";
import { FakeEngine, type FakeRegistryImage } from "../../src/drivers/fake/index.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";

export const AWS = {
  region: "/api/infra/v1/region/aws/us-east-1/",
  node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
};

/** A fake engine that remembers every spec it was asked to create, and can hold changes. */
export class RecordingEngine extends FakeEngine {
  readonly created: { id: string; spec: ContainerSpec }[] = [];
  /**
   * Container and image calls made on this engine, in order: the operation's name, and for a
   * listing the labels it filtered by (`listContainers io.berth.node`).
   */
  readonly calls: string[] = [];
  /** Runs once, after the next listing of a whole node (`io.berth.node`) has been read. */
  afterNodeListing: (() => Promise<void>) | undefined;
  private gate: Promise<void> | undefined;
  /** Creates, stops and removes held by the gate right now (Berth's calls in flight on this engine). */
  waiting = 0;

  private async pass(): Promise<void> {
    if (!this.gate) return;
    this.waiting += 1;
    try {
      await this.gate;
    } finally {
      this.waiting -= 1;
    }
  }

  override async listContainers(options?: ListContainersOptions): Promise<ContainerSummary[]> {
    const labels = Object.keys(options?.labels ?? {});
    this.calls.push(["listContainers", ...labels].join(" "));
    const found = await super.listContainers(options);
    const hook = this.afterNodeListing;
    if (hook && labels.includes("io.berth.node")) {
      this.afterNodeListing = undefined;
      await hook();
    }
    return found;
  }

  override async inspectContainer(id: string): Promise<ContainerView | undefined> {
    this.calls.push("inspectContainer");
    return super.inspectContainer(id);
  }

  override async startContainer(id: string): Promise<void> {
    this.calls.push("startContainer");
    return super.startContainer(id);
  }

  override async hasImage(ref: string): Promise<boolean> {
    this.calls.push("hasImage");
    return super.hasImage(ref);
  }

  override async createContainer(spec: ContainerSpec): Promise<string> {
    this.calls.push("createContainer");
    await this.pass();
    const id = await super.createContainer(spec);
    this.created.push({ id, spec: structuredClone(spec) });
    return id;
  }

  override async stopContainer(id: string, options?: StopContainerOptions): Promise<StopOutcome> {
    this.calls.push("stopContainer");
    await this.pass();
    return super.stopContainer(id, options);
  }

  override async removeContainer(id: string, options?: RemoveContainerOptions): Promise<void> {
    this.calls.push("removeContainer");
    await this.pass();
    return super.removeContainer(id, options);
  }

  /**
   * Holds every create, stop and remove until the returned function is called, so an operation
   * stays in its transitional state (Starting, Stopping, Terminating…) while a test looks at it.
   */
  hold(): () => void {
    let release = () => {};
    this.gate = new Promise<void>((resolve) => {
      release = () => {
        this.gate = undefined;
        resolve();
      };
    });
    return release;
  }

  specOf(id: string): ContainerSpec | undefined {
    return this.created.find((c) => c.id === id)?.spec;
  }
}

export interface Sim {
  h: Harness;
  alice: Caller;
  /** Every simulated node's engine, by node uuid. */
  engines: Map<string, RecordingEngine>;
  /** Closes the harness and stops every simulated process (sleeping containers would keep the test alive). */
  close(): Promise<void>;
}

/** An HTTP app on 8080 in two good versions and one whose answers are 503 (its check fails). */
export const APP_IMAGES: FakeRegistryImage[] = [
  { ref: "app:1", cmd: ["server"], programs: ["server"], serves: { ports: [8080] } },
  { ref: "app:2", cmd: ["server"], programs: ["server"], serves: { ports: [8080] } },
  { ref: "app:sick", cmd: ["server"], programs: ["server"], serves: { ports: [8080], status: 503 } },
];
/** A health check of APP_IMAGES, fast enough for tests. */
export const APP_CHECK = { type: "http", port: 8080, interval: 0.15, timeout: 1, retries: 2 };

/** A harness with fast reconciles and stops; simulated nodes get recording engines. */
export async function startSim(
  opts: { registry?: FakeRegistryImage[]; users?: string[]; env?: Record<string, string> } = {},
): Promise<Sim & { users: Record<string, Caller> }> {
  const engines = new Map<string, RecordingEngine>();
  const h = await startHarness({
    env: { BERTH_RECONCILE_INTERVAL_MS: "200", BERTH_CONTAINER_STOP_TIMEOUT_S: "1", ...opts.env },
    makeFakeEngine: (n) => {
      const e = new RecordingEngine({
        name: `sim-${n.uuid.slice(0, 8)}`,
        subnet: `10.${128 + Math.floor(n.slot / 256)}.${n.slot % 256}.0/24`,
        registry: opts.registry ?? [],
      });
      engines.set(n.uuid, e);
      return e;
    },
  });
  const alice = await createUser(h, "alice");
  const users: Record<string, Caller> = {};
  for (const u of opts.users ?? []) users[u] = await createUser(h, u);
  return {
    h,
    alice,
    engines,
    users,
    async close() {
      await h.close();
      for (const e of engines.values()) e.close();
    },
  };
}

export const uuidOf = (uri: string): string => uri.split("/").filter(Boolean).at(-1)!;

/** Waits until GET `uri` shows `state`. */
export async function until(s: Sim, uri: string, state: string, who = s.alice, timeoutMs = 10_000) {
  return waitFor(
    `${uri} ${state}`,
    async () => {
      const r = (await call(s.h, who, "GET", uri)).body;
      return r.state === state ? r : undefined;
    },
    timeoutMs,
  );
}

/** The log lines of an action. */
export async function logOf(s: Sim, actionUuid: string): Promise<string[]> {
  return (await s.h.store.actions.actionLogTail(actionUuid, 200)).map((l) => l.line);
}

/** Waits for the action a response points at to end; returns it with its log. */
export async function finished(s: Sim, res: { headers: Record<string, unknown> }, who = s.alice) {
  const uri = res.headers["x-platform-action-uri"] as string;
  assert.ok(uri, "the response names its action");
  try {
    const a = await waitFor(`action ${uri}`, async () => {
      const a = (await call(s.h, who, "GET", uri)).body;
      return ["Success", "Failed", "Canceled"].includes(a.state) ? a : undefined;
    });
    return { ...a, log: await logOf(s, a.uuid) } as { state: string; uuid: string; log: string[] };
  } catch (err) {
    const a = (await call(s.h, who, "GET", uri)).body;
    throw new Error(
      `${(err as Error).message}: ${a.action} ${a.state}\n${(await logOf(s, a.uuid)).join("\n")}`,
    );
  }
}

/** POSTs an operation and waits for its action to succeed. */
export async function operate(s: Sim, uri: string, op: string, who = s.alice) {
  const res = await call(
    s.h,
    who,
    op === "terminate" ? "DELETE" : "POST",
    op === "terminate" ? uri : `${uri}${op}/`,
  );
  assert.equal(res.status, 202, res.raw);
  const a = await finished(s, res, who);
  assert.equal(a.state, "Success", a.log.join("\n"));
  return a;
}

/** Creates and deploys a node cluster; returns it Deployed. */
export async function deployCluster(s: Sim, body: Record<string, unknown>, who = s.alice) {
  const res = await call(s.h, who, "POST", "/api/infra/v1/nodecluster/", { ...AWS, ...body });
  assert.equal(res.status, 201, res.raw);
  const deploy = await call(s.h, who, "POST", `${res.body.resource_uri}deploy/`);
  assert.equal(deploy.status, 202, deploy.raw);
  return until(s, res.body.resource_uri, "Deployed", who);
}

/** Creates a service (asserting 201). */
export async function createService(s: Sim, body: Record<string, unknown>, who = s.alice) {
  const res = await call(s.h, who, "POST", "/api/app/v1/service/", body);
  assert.equal(res.status, 201, res.raw);
  return res.body;
}

/** Creates a service of `sleep` containers, starts it and waits until it is Running. */
export async function runningService(s: Sim, body: Record<string, unknown>, who = s.alice) {
  const svc = await createService(s, { image: "busybox:local", run_command: "sleep 100000", ...body }, who);
  await operate(s, svc.resource_uri, "start", who);
  return until(s, svc.resource_uri, "Running", who);
}

/** The containers of a service as the API shows them, by name. */
export async function containersOf(s: Sim, service: { containers: string[] }, who = s.alice) {
  const out = await Promise.all(
    service.containers.map(async (uri) => (await call(s.h, who, "GET", uri)).body),
  );
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

/** The engine container behind a Berth container, with the engine it runs on and the spec it was created with. */
export async function engineContainer(
  s: Sim,
  containerUri: string,
): Promise<{ engine: RecordingEngine; id: string; view: ContainerView; spec: ContainerSpec }> {
  const row = await s.h.store.services.findContainer(uuidOf(containerUri));
  assert.ok(row?.engine_id, `${containerUri} has an engine container`);
  const engine = s.engines.get(row.node_uuid);
  assert.ok(engine, "the container's node has a simulated engine");
  const view = await engine.inspectContainer(row.engine_id);
  assert.ok(view, "the engine knows the container");
  const spec = engine.specOf(row.engine_id);
  assert.ok(spec, "the engine recorded the container's creation");
  return { engine, id: row.engine_id, view, spec };
}

/** Every engine container carrying Berth's labels for a service, on every node. */
export async function engineContainersOfService(s: Sim, serviceUri: string) {
  const out: { node: string; id: string; running: boolean }[] = [];
  for (const [node, engine] of s.engines) {
    const list = await engine.listContainers({
      all: true,
      labels: { "io.berth.service": uuidOf(serviceUri) },
    });
    for (const c of list) out.push({ node, id: c.id, running: c.state === "running" });
  }
  return out;
}

export const envOf = (list: { key: string; value: string }[]): Record<string, string> =>
  Object.fromEntries(list.map((e) => [e.key, e.value]));

export { call, waitFor };
