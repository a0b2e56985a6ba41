// The `local` provider: each node is a Docker engine that Berth starts on this host in its own
// network namespace (src/drivers/local does the work; this adapts it to node records).
import type { LocalProvider } from "../drivers/local/index.ts";
import type { ProvisionContext, Provisioned, Provisioner } from "./provisioners.ts";

export class LocalProvisioner implements Provisioner {
  private prereq: { available: boolean; reason?: string } = { available: false, reason: "not checked yet" };

  constructor(private readonly local: LocalProvider) {}

  /** Checks root, dockerd and the host tools; call at start-up (and whenever a refresh is wanted). */
  async refresh(): Promise<void> {
    this.prereq = await this.local.prerequisites();
  }

  availability() {
    return this.prereq;
  }

  async deployNode(ctx: ProvisionContext): Promise<Provisioned> {
    await ctx.log(`Preparing the host network for node ${ctx.node.uuid}`);
    await this.local.ensureHost();
    await ctx.log("Starting a Docker engine in the node's own network namespace");
    const n = await this.local.deployNode({ nodeId: ctx.node.uuid, index: ctx.node.slot });
    await ctx.log(`Engine answers at ${n.engineUrl}; containers get addresses in ${n.containerSubnet}`);
    if (n.usernsRemap) {
      await ctx.log(
        `Containers run in user namespaces: their root is host uid ${n.usernsRemap.uid} (subordinate ids of ${n.usernsRemap.user}), not host root`,
      );
    } else if (n.usernsRemapSkipped) {
      await ctx.log(
        `Containers run WITHOUT user-namespace remapping (their root is host root): ${n.usernsRemapSkipped}`,
      );
    }
    return { engine_url: n.engineUrl, public_ip: n.address, private_subnet: n.containerSubnet };
  }

  async terminateNode(ctx: ProvisionContext): Promise<void> {
    await ctx.log("Removing the node's containers, engine, namespace, routes and rules");
    await this.local.terminateNode(ctx.node.uuid);
    if (this.local.listNodes().length === 0) await this.local.teardownHost();
  }

  async restartEngine(ctx: ProvisionContext): Promise<void> {
    await ctx.log("Restarting the node's engine");
    await this.local.restartEngine(ctx.node.uuid);
  }
}
