// How nodes come to exist at each provider: the local provider (real engines on this host),
// simulated cloud providers (fake engines after realistic delays), and attached engines (byon).
import { lastSegment } from "../domain/uri.ts";
import type { Engine } from "../drivers/engine.ts";
import type { NodeRow } from "../store/nodes.ts";

export interface ProvisionContext {
  node: NodeRow;
  log(line: string): Promise<void>;
  signal: AbortSignal;
}

/** What a deployed node reports about itself; the rest of its fields come from its engine. */
export interface Provisioned {
  engine_url: string;
  public_ip: string;
  private_subnet: string;
}

export interface Provisioner {
  /** Whether new nodes can be deployed; the reason when not. */
  availability(): { available: boolean; reason?: string };
  deployNode(ctx: ProvisionContext): Promise<Provisioned>;
  /** Removes the node and everything created for it; idempotent. */
  terminateNode(ctx: ProvisionContext): Promise<void>;
  /** Restarts the node's engine (engine-upgrade); containers come back per their restart policy. */
  restartEngine(ctx: ProvisionContext): Promise<void>;
}

export type EngineAddress = Pick<NodeRow, "uuid" | "engine_url" | "engine_tls"> &
  Partial<Pick<NodeRow, "node_type" | "slot">>;

/** Connects to node engines; the only way the rest of Berth reaches an engine. */
export interface EngineSource {
  forNode(node: EngineAddress): Engine;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

/** Simulated cloud providers: nodes run on fake engines after the provider's delays. */
export class SimulatedProvisioner implements Provisioner {
  constructor(
    private readonly opts: {
      provider: string;
      delaysMs: { deploy_node: number; terminate_node: number };
      /** Scales the catalogue's delays (tests use a small factor). */
      delayFactor: number;
      /** Forgets the fake engine of a terminated node. */
      dropEngine(nodeUuid: string): void;
    },
  ) {}

  availability() {
    return { available: true };
  }

  async deployNode(ctx: ProvisionContext): Promise<Provisioned> {
    await ctx.log(
      `Requesting a ${lastSegment(ctx.node.node_type)} instance from ${this.opts.provider} (simulated)`,
    );
    await sleep(this.opts.delaysMs.deploy_node * this.opts.delayFactor, ctx.signal);
    const slot = ctx.node.slot;
    // 198.18.0.0/15 is reserved for benchmarks: a simulated address that no real host uses.
    const publicIp = `198.${18 + Math.floor(slot / 65024)}.${Math.floor((slot % 65024) / 254)}.${(slot % 254) + 1}`;
    await ctx.log(`Instance is up at ${publicIp}; its engine is simulated`);
    return { engine_url: `fake://${ctx.node.uuid}`, public_ip: publicIp, private_subnet: "" };
  }

  async terminateNode(ctx: ProvisionContext): Promise<void> {
    await ctx.log(`Terminating the instance at ${this.opts.provider} (simulated)`);
    await sleep(this.opts.delaysMs.terminate_node * this.opts.delayFactor, ctx.signal);
    this.opts.dropEngine(ctx.node.uuid);
  }

  async restartEngine(ctx: ProvisionContext): Promise<void> {
    await ctx.log("Restarting the simulated engine");
    await sleep(500 * this.opts.delayFactor, ctx.signal);
  }
}

/** Engines attached by address (bring your own node): Berth never created them, so it never destroys them. */
export class AttachedProvisioner implements Provisioner {
  availability() {
    return { available: true };
  }
  async deployNode(): Promise<Provisioned> {
    throw new Error("attached engines are added with POST /api/infra/v1/node/, not deployed");
  }
  async terminateNode(ctx: ProvisionContext): Promise<void> {
    await ctx.log("Detaching the engine; Berth leaves the engine itself running");
  }
  async restartEngine(): Promise<void> {
    throw new Error("Berth cannot restart an engine it did not start");
  }
}
