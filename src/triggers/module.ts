// Triggers: URLs that start a service's redeploy or scale without credentials; their routes.
import type { ActionEngine } from "../actions/engine.ts";
import { triggerRoutes } from "../api/routes/triggers.ts";
import type { Core, Routes } from "../composition.ts";
import { TriggerService } from "./service.ts";

export function triggersModule(core: Core, parts: { actions: ActionEngine }) {
  const { store, clock, box, config } = core;
  const { actions } = parts;
  const triggers = new TriggerService({ store, clock, actions, box, publicUrl: config.publicUrl });
  const routes: Routes = [(a) => triggerRoutes(a, { store, actions, triggers })];
  return { triggers, routes };
}
