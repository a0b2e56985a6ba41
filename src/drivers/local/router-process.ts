// The router of a local node (issue 30): Caddy, started by Berth in the node's network namespace
// next to its engine (drivers/router/caddy-process.ts), so it listens on the node's address (:80,
// :443) and reaches containers on the node's bridge and, by the lab routes, other nodes'.
// Terminating the node ends it with the node's other processes (by namespace inode,
// terminate.ts); `release()` then removes its files.
//
// Routes' upstreams are looked up at Berth's route resolver (drivers/router/dns.ts), which listens
// on the lab bridge's host address (`<a>.<b>.0.1`, addresses.ts), port 53: a node's namespace
// reaches it by its link, nothing outside the lab does, and each node is answered only its own
// routes, by the node address its queries come from.
import fs from "node:fs";
import path from "node:path";
import type { CaddyRouter } from "../router/caddy.ts";
import { CaddyProcess, MAX_SOCKET_PATH } from "../router/caddy-process.ts";
import { RouteResolver } from "../router/dns.ts";
import { shortNodeId } from "./addresses.ts";
import type { LocalProvider } from "./local-provider.ts";

export class LocalRouters {
  private readonly routers = new Map<string, CaddyProcess>();
  /** Nodes whose router was released (terminated): never started again, whatever asks for it. */
  private readonly released = new Set<string>();
  /** The route resolver of the lab (one host address for every node). */
  private resolver: RouteResolver | undefined;

  constructor(
    private readonly o: {
      provider: Pick<LocalProvider, "findNode">;
      /** Where each node's router keeps its files (`<dir>/<12 hex>/`). */
      dir: string;
      log?(line: string): void;
    },
  ) {}

  /** The router of a local node the provider knows, undefined otherwise. */
  routerFor(nodeId: string): CaddyRouter | undefined {
    if (this.released.has(nodeId)) return undefined;
    const node = this.o.provider.findNode(nodeId);
    if (!node || node.terminating) return undefined;
    let router = this.routers.get(nodeId);
    if (router) return router.router;
    const dir = path.join(this.o.dir, shortNodeId(nodeId));
    const socket = path.join(dir, "admin.sock");
    router = new CaddyProcess({
      dir,
      adminSocket: socket.length <= MAX_SOCKET_PATH ? socket : fallbackSocket(nodeId),
      netns: node.netnsName,
      address: node.address,
      label: `the router of ${node.netnsName}`,
      dns: this.resolverFor(node.address).forSource(node.address),
      mayStart: () => {
        const now = this.o.provider.findNode(nodeId);
        return !this.released.has(nodeId) && !!now && !now.terminating;
      },
    });
    this.routers.set(nodeId, router);
    return router.router;
  }

  /** The lab's route resolver, on the host's address of the link network the node is on. */
  private resolverFor(nodeAddress: string): RouteResolver {
    this.resolver ??= new RouteResolver({
      host: nodeAddress.replace(/\.\d+$/, ".1"),
      port: 53,
      log: this.o.log,
    });
    return this.resolver;
  }

  /** Stops answering lookups (Berth stops). */
  close(): void {
    this.resolver?.close();
    this.resolver = undefined;
  }

  /** Stops a node's router (by its recorded process) and removes its files. */
  async release(nodeId: string): Promise<void> {
    // A configuration or a renewal check asked after this (a worker still running, a timer) would
    // start a new Caddy in the node's namespace, kept alive by it after the node is gone.
    this.released.add(nodeId);
    const node = this.o.provider.findNode(nodeId);
    if (node) this.resolver?.forget(node.address);
    const known = this.routers.get(nodeId);
    this.routers.delete(nodeId);
    const dir = path.join(this.o.dir, shortNodeId(nodeId));
    await (
      known ??
      new CaddyProcess({
        dir,
        adminSocket: fallbackSocket(nodeId),
        address: "",
        label: "a router",
      })
    ).remove();
    fs.rmSync(fallbackSocket(nodeId), { force: true });
  }
}

function fallbackSocket(nodeId: string): string {
  return `/run/berth-router-${shortNodeId(nodeId)}.sock`;
}
