// Engine clients per node: Docker engines over their URL (with TLS for attached engines), through
// an agent's tunnel for agent nodes, and in-memory fake engines for simulated nodes. Clients are cached per node and URL.
import { DockerEngine } from "../drivers/docker/docker-engine.ts";
import type { DockerTls } from "../drivers/docker/endpoint.ts";
import { type Engine, EngineError } from "../drivers/engine.ts";
import type { EngineAddress, EngineSource } from "./provisioners.ts";

/** What a simulated node's fake engine is made from: its size comes from its node type. */
export interface FakeNodeFacts {
  uuid: string;
  node_type: string;
  slot: number;
}

export class Engines implements EngineSource {
  private readonly docker = new Map<string, Engine>();
  private readonly fakes = new Map<string, Engine>();

  constructor(
    private readonly makeFake: (node: FakeNodeFacts) => Engine,
    /** Opens TLS material sealed at rest (it holds a private key). */
    private readonly openSecret: (sealed: string) => string = (s) => s,
    /**
     * Whether an engine address may be dialled now. Local nodes' addresses exist only while their
     * namespace does: once torn down, a packet to them would follow the host's default route off
     * the machine, so such addresses are refused here instead of dialled.
     */
    private readonly mayDial: (engineUrl: string) => boolean = () => true,
    /** Engines of agent nodes (`tunnel://<node uuid>`), reached through the agent's tunnel. */
    private readonly tunnels?: { engineFor(nodeUuid: string): Engine },
  ) {}

  forNode(node: EngineAddress): Engine {
    if (node.engine_url.startsWith("fake://")) {
      const id = node.engine_url.slice("fake://".length);
      let fake = this.fakes.get(id);
      if (!fake) {
        fake = this.makeFake({ uuid: id, node_type: node.node_type ?? "", slot: node.slot ?? 0 });
        this.fakes.set(id, fake);
      }
      return fake;
    }
    if (node.engine_url.startsWith("tunnel://")) {
      if (!this.tunnels) return refusingEngine(node.engine_url);
      return this.tunnels.engineFor(node.engine_url.slice("tunnel://".length));
    }
    if (!this.mayDial(node.engine_url)) return refusingEngine(node.engine_url);
    const key = `${node.uuid} ${node.engine_url}`;
    let engine = this.docker.get(key);
    if (!engine) {
      const tls = node.engine_tls ? (JSON.parse(this.openSecret(node.engine_tls)) as DockerTls) : undefined;
      engine = new DockerEngine({ endpoint: node.engine_url, tls, pingTimeoutMs: 3000 });
      this.docker.set(key, engine);
    }
    return engine;
  }

  /** Forgets a simulated node's engine (its instance was terminated). */
  dropFake(nodeUuid: string): void {
    this.fakes.delete(nodeUuid);
  }
}

/** An engine whose every call fails as unreachable, without sending anything anywhere. */
function refusingEngine(url: string): Engine {
  const error = () => new EngineError("unreachable", `the engine at ${url} no longer exists on this host`);
  return new Proxy({} as Engine, {
    get: (_target, prop) =>
      prop === "logs" || prop === "events"
        ? () => ({
            [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(error()) }),
          })
        : () => Promise.reject(error()),
  });
}
