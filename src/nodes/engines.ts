// Engine clients per node: Docker engines over their URL (with TLS for attached engines), through
// an agent's tunnel for agent nodes, and in-memory fake engines for simulated nodes. Clients are cached per node and URL.
import { DockerEngine } from "../drivers/docker/docker-engine.ts";
import { type Engine, EngineError } from "../drivers/engine.ts";
import { decodeEngineTls } from "../store/codec.ts";
import type { EngineAddress, EngineSource } from "./provisioners.ts";

/** What a simulated node's fake engine is made from: its size comes from its node type. */
export interface FakeNodeFacts {
  uuid: string;
  node_type: string;
  slot: number;
}

/** Simulated nodes' engines shared by every replica (nodes/simulated-engines.ts). */
export interface SharedSimulatedEngines {
  engineFor(node: FakeNodeFacts): Engine;
  drop(nodeUuid: string): Promise<void>;
}

/** Reports how long an engine call took (metrics). */
export type EngineCallObserver = (node: string, operation: string, seconds: number, ok: boolean) => void;

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
    private readonly observe?: EngineCallObserver,
    /** When set, simulated nodes' engines come from here (several replicas on one database). */
    private readonly shared?: SharedSimulatedEngines,
  ) {}

  forNode(node: EngineAddress): Engine {
    if (node.engine_url.startsWith("fake://")) {
      const id = node.engine_url.slice("fake://".length);
      let fake = this.fakes.get(id);
      if (!fake) {
        const facts = { uuid: id, node_type: node.node_type ?? "", slot: node.slot ?? 0 };
        fake = timed(this.shared ? this.shared.engineFor(facts) : this.makeFake(facts), id, this.observe);
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
      const tls = node.engine_tls ? decodeEngineTls(this.openSecret(node.engine_tls)) : undefined;
      engine = timed(
        new DockerEngine({ endpoint: node.engine_url, tls, pingTimeoutMs: 3000 }),
        node.uuid,
        this.observe,
      );
      this.docker.set(key, engine);
    }
    return engine;
  }

  /** Forgets a simulated node's engine (its instance was terminated). */
  dropFake(nodeUuid: string): void {
    this.fakes.delete(nodeUuid);
    void this.shared?.drop(nodeUuid).catch(() => undefined);
  }
}

/**
 * The engine with every call that answers with a promise timed (streams such as events and logs
 * are not calls and pass through untouched).
 */
function timed(engine: Engine, node: string, observe: EngineCallObserver | undefined): Engine {
  if (!observe) return engine;
  return new Proxy(engine, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== "function" || typeof prop !== "string") return value;
      return (...args: unknown[]) => {
        const started = performance.now();
        const result: unknown = value.apply(target, args);
        if (!(result instanceof Promise)) return result;
        return result.then(
          (v: unknown) => {
            observe(node, prop, (performance.now() - started) / 1000, true);
            return v;
          },
          (err: unknown) => {
            observe(node, prop, (performance.now() - started) / 1000, false);
            throw err;
          },
        );
      };
    },
  });
}

/** An engine whose every call fails as unreachable, without sending anything anywhere. */
function refusingEngine(url: string): Engine {
  const error = () => new EngineError("unreachable", `the engine at ${url} no longer exists on this host`);
  return new Proxy({} as Engine, {
    // Not a thenable: an async function may return this engine (awaiting it must not call a
    // refusing `then`, whose rejection nobody would handle).
    get: (_target, prop) =>
      prop === "then" || typeof prop === "symbol"
        ? undefined
        : prop === "logs" || prop === "events"
          ? () => ({
              [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(error()) }),
            })
          : () => Promise.reject(error()),
  });
}
