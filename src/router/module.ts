// The router capability (issue 30), assembled for platform.ts: the routers of the nodes and their
// controller (routers.ts), the route figures on /metrics, the routes. Started after the reconciler.

import path from "node:path";
import { routerRoutes } from "../api/routes/router.ts";
import type { Core, Routes } from "../composition.ts";
import type { Duties } from "../domain/duties.ts";
import type { LocalProvider } from "../drivers/local/index.ts";
import { LocalRouters } from "../drivers/local/router-process.ts";
import { AgentRouter } from "../drivers/router/agent-router.ts";
import type { TunnelHub } from "../drivers/tunnel/hub.ts";
import { RouterModule } from "./routers.ts";

export type { RouterModule };

/** The router capability for platform.ts: the module, its routes; started after the reconciler. */
export function routerModule(
  core: Core,
  parts: { local?: LocalProvider; duties?: Duties; tunnels?: TunnelHub } = {},
) {
  const { store, box, config, metrics, onError } = core;
  const locals = parts.local
    ? new LocalRouters({
        provider: parts.local,
        dir: path.join(config.dataDir, "local-routers"),
        log: (line) => onError("router")(new Error(line)),
      })
    : undefined;
  const tunnels = parts.tunnels;
  const agentRouters = new Map<string, AgentRouter>();
  const router = new RouterModule({
    store,
    settings: config.router,
    open: (sealed) => box.open(sealed),
    localRouter: (node) => locals?.routerFor(node.uuid),
    releaseLocal: async (uuid) => locals?.release(uuid),
    stopped: () => locals?.close(),
    agentRouter: (node) => {
      if (!tunnels?.offers(node.uuid, "router")) return undefined;
      let r = agentRouters.get(node.uuid);
      if (!r) {
        r = new AgentRouter({ node: node.uuid, openStream: () => tunnels.openStream(node.uuid, "router") });
        agentRouters.set(node.uuid, r);
      }
      return r;
    },
    agentHere: (uuid) => tunnels?.isConnected(uuid) ?? false,
    releaseAgent: (uuid) => agentRouters.delete(uuid),
    onError: onError("router"),
    ownsNode: parts.duties ? (uuid) => parts.duties!.ownsNode(uuid) : undefined,
  });
  router.registerMetrics(metrics.registry);
  // An agent that connects (again) may have started over: its router is configured again.
  tunnels?.listen({ changed: (uuid, connected) => connected && router.controller.reconnected(uuid) });
  const routes: Routes = [(a) => routerRoutes(a, { store, router, seal: (plain) => box.seal(plain) })];
  return { router, routes };
}
