// The router of a local node (issue 30): Caddy, started by Berth in the node's network namespace
// next to its engine (drivers/router/caddy-process.ts), so it listens on the node's address (:80,
// :443) and reaches containers on the node's bridge and, by the lab routes, other nodes'.
// Terminating the node ends it with the node's other processes (by namespace inode,
// terminate.ts); `release()` then removes its files.
import fs from "node:fs";
import path from "node:path";
import type { CaddyRouter } from "../router/caddy.ts";
import { CaddyProcess, MAX_SOCKET_PATH } from "../router/caddy-process.ts";
import { shortNodeId } from "./addresses.ts";
import type { LocalProvider } from "./local-provider.ts";

export class LocalRouters {
  private readonly routers = new Map<string, CaddyProcess>();

  constructor(
    private readonly o: {
      provider: Pick<LocalProvider, "findNode">;
      /** Where each node's router keeps its files (`<dir>/<12 hex>/`). */
      dir: string;
    },
  ) {}

  /** The router of a local node the provider knows, undefined otherwise. */
  routerFor(nodeId: string): CaddyRouter | undefined {
    const node = this.o.provider.findNode(nodeId);
    if (!node) return undefined;
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
    });
    this.routers.set(nodeId, router);
    return router.router;
  }

  /** Stops a node's router (by its recorded process) and removes its files. */
  async release(nodeId: string): Promise<void> {
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
