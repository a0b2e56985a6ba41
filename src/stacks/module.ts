// Stacks: the stack service with its follower, its action kinds, relation and routes.
import type { ActionEngine } from "../actions/engine.ts";
import type { Relations } from "../actions/relations.ts";
import { stackRoutes } from "../api/routes/stacks.ts";
import type { Core, Routes } from "../composition.ts";
import type { ServiceManager } from "../orchestrator/manager.ts";
import type { Orchestrator } from "../orchestrator/services.ts";
import { StackService } from "./service.ts";

export function stacksModule(
  core: Core,
  parts: {
    actions: ActionEngine;
    relations: Relations;
    services: ServiceManager;
    orchestrator: Orchestrator;
  },
) {
  const { store, clock, answers } = core;
  const { actions } = parts;
  // The stack follower's poll only covers other replicas' commits: rare on SQLite, where there are none.
  const stacks = new StackService({
    store,
    clock,
    services: parts.services,
    orchestrator: parts.orchestrator,
    pollMs: core.replicated ? 2000 : 30_000,
  });
  stacks.register(actions);
  parts.relations.register("stack", stacks.related);
  const routes: Routes = [(a) => stackRoutes(a, { store, actions, stacks, answers })];
  return { stacks, routes };
}
