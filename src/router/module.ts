// The router capability (issue 30), assembled for platform.ts: the routers of the nodes and their
// controller (routers.ts), the route figures on /metrics, the routes. Started after the reconciler.
import { routerRoutes } from "../api/routes/router.ts";
import type { Core, Routes } from "../composition.ts";
import type { Router } from "../drivers/router/router.ts";
import type { NodeRow } from "../store/nodes.ts";
import { RouterModule } from "./routers.ts";

export type { RouterModule };

/** The router capability for platform.ts: the module, its routes; started after the reconciler. */
export function routerModule(core: Core, parts: { localRouter?(node: NodeRow): Router | undefined } = {}) {
  const { store, box, config, metrics, onError } = core;
  const router = new RouterModule({
    store,
    settings: config.router,
    open: (sealed) => box.open(sealed),
    localRouter: parts.localRouter,
    onError: onError("router"),
  });
  router.registerMetrics(metrics.registry);
  const routes: Routes = [(a) => routerRoutes(a, { store, router, seal: (plain) => box.seal(plain) })];
  return { router, routes };
}
