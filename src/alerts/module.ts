// Alerts (issue 32): the conditions of each rule kind, the rules' service and routes, and the
// notifier that evaluates rules and sends deliveries on the replica leading `alerts`. Webhooks go
// through the registries' outbound guard, with their own allow-list (BERTH_ALERT_WEBHOOK_ALLOW).
import type { Outbox } from "../accounts/outbox.ts";
import { alertRoutes } from "../api/routes/alerts.ts";
import type { Core, Routes } from "../composition.ts";
import type { Duties } from "../domain/duties.ts";
import type { HostLookup, OutboundPolicy } from "../registry/outbound.ts";
import { Conditions } from "./conditions.ts";
import { AlertNotifier } from "./notifier.ts";
import { AlertService } from "./service.ts";

export function alertsModule(
  core: Core,
  parts: { outbox: Outbox; duties: Duties; statsStepMs: number; resolveHost?: HostLookup },
) {
  const { config, store, clock, box } = core;
  const webhooks: OutboundPolicy = {
    allow: config.alerts.webhookAllow,
    insecure: [],
    timeoutMs: config.alerts.webhookTimeoutMs,
    lookup: parts.resolveHost,
    allowSetting: "BERTH_ALERT_WEBHOOK_ALLOW",
  };
  const now = () => clock.now();
  const conditions = new Conditions({ store, statsStepMs: parts.statsStepMs });
  const alerts = new AlertService({ store, box, conditions, webhooks, now });
  const notifier = new AlertNotifier({
    store,
    alerts,
    conditions,
    outbox: parts.outbox,
    webhooks,
    duties: parts.duties,
    now,
    intervalMs: config.alerts.intervalMs,
    maxAttempts: config.alerts.maxAttempts,
    retryBaseMs: config.alerts.retryBaseMs,
    publicUrl: config.publicUrl,
    onError: core.onError("alerts"),
  });
  const routes: Routes = [(a) => alertRoutes(a, { store, alerts })];
  return { alerts, conditions, notifier, routes };
}
