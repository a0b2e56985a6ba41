// Alert evaluation and delivery (issue 32), run by the replica leading `alerts`: at every interval
// each enabled rule's condition is read; a subject it starts to hold for opens an incident (once:
// the store refuses a second open incident for the same rule and subject) and a subject it no
// longer holds for resolves its incident; each opening and resolution queues one delivery per
// channel. Due deliveries are then sent: webhooks through the outbound guard (the URL resolved
// and checked again at every attempt), email through the mail outbox. A failed attempt is retried
// after a wait that doubles each time, up to the configured attempts; a webhook the guard refuses
// is not retried. Every attempt's outcome is in the delivery log. A pass also runs when woken
// after each stats collection round of this replica (`wake`), so that what a round recorded (a
// crash loop's restarts, memory above its share) is seen then, not up to an interval later.
import { randomUUID } from "node:crypto";
import type { MailMessage, Outbox } from "../accounts/outbox.ts";
import type { Duties } from "../domain/duties.ts";
import { type OutboundPolicy, OutboundRefused, outboundRequest } from "../registry/outbound.ts";
import type { AlertDeliveryRow, AlertIncidentRow, AlertRuleRow } from "../store/alerts.ts";
import { alertsOf } from "../store/alerts.ts";
import type { Store } from "../store/store.ts";
import type { Conditions } from "./conditions.ts";
import { type AlertService, alertUri, type Channel, channelTarget } from "./service.ts";

export interface NotifierDeps {
  store: Store;
  alerts: AlertService;
  conditions: Conditions;
  outbox: Outbox;
  webhooks: OutboundPolicy;
  duties: Duties;
  now(): number;
  intervalMs: number;
  maxAttempts: number;
  retryBaseMs: number;
  publicUrl: string;
  onError(err: unknown): void;
}

/** Deliveries sent per pass. */
const DELIVERIES_PER_PASS = 100;

export class AlertNotifier {
  private timer: NodeJS.Timeout | undefined;
  /** The passes under way (one, and the one more a wake asked for), until they end. */
  private running: Promise<void> | undefined;
  /** A wake came while a pass ran: one more pass follows it. */
  private again = false;

  constructor(private readonly deps: NotifierDeps) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.deps.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.again = false;
  }

  /**
   * Runs a pass now, once started (after a stats round): at once when none runs, else once more
   * as soon as the one under way ends (a burst of wakes costs one more pass, never a queue).
   */
  wake(): void {
    if (!this.timer) return;
    if (this.running) this.again = true;
    else void this.tick();
  }

  /** One pass (joined while the last one runs): evaluate the rules, then send what is due. */
  tick(): Promise<void> {
    this.running ??= this.passes().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** Resolves once no pass runs (tests that run passes of their own beside woken ones). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private async passes(): Promise<void> {
    do {
      this.again = false;
      if (!this.deps.duties.leads("alerts")) return;
      try {
        await this.evaluate();
        await this.deliver();
      } catch (err) {
        this.deps.onError(err);
      }
    } while (this.again && this.timer);
  }

  /** Opens and resolves incidents of every enabled rule. */
  async evaluate(): Promise<void> {
    const { store, alerts, conditions } = this.deps;
    for (const rule of await alertsOf(store).enabledRules()) {
      const now = this.deps.now();
      try {
        const holding = await conditions.holding(alerts.facts(rule), now);
        const open = await alertsOf(store).openIncidents(rule.uuid);
        const openBy = new Map(open.map((i) => [i.subject, i]));
        const channels = alerts.channelsOf(rule);
        const deliveries = () =>
          channels.map((c, channel) => ({ uuid: randomUUID(), channel, target: channelTarget(c) }));
        for (const h of holding) {
          if (openBy.has(h.subject)) continue;
          await alertsOf(store).openIncident(
            {
              uuid: randomUUID(),
              rule_uuid: rule.uuid,
              namespace: rule.namespace,
              subject: h.subject,
              summary: h.summary,
              started: now,
              resolved: null,
            },
            deliveries(),
            now,
          );
        }
        const still = new Set(holding.map((h) => h.subject));
        for (const i of open)
          if (!still.has(i.subject)) await alertsOf(store).resolveIncident(i, deliveries(), now);
      } catch (err) {
        this.deps.onError(err);
      }
    }
  }

  /** Sends the deliveries whose time has come. */
  async deliver(): Promise<void> {
    const { store } = this.deps;
    const due = await alertsOf(store).dueDeliveries(this.deps.now(), DELIVERIES_PER_PASS);
    const rules = new Map<string, AlertRuleRow | undefined>();
    for (const d of due) {
      const wait = this.deps.retryBaseMs * 2 ** d.attempts;
      if (!(await alertsOf(store).claimDelivery(d, this.deps.now() + wait))) continue;
      if (!rules.has(d.rule_uuid)) rules.set(d.rule_uuid, await alertsOf(store).findRule(d.rule_uuid));
      const rule = rules.get(d.rule_uuid);
      const incident = await alertsOf(store).findIncident(d.incident_uuid);
      const channel = rule ? this.deps.alerts.channelsOf(rule)[d.channel] : undefined;
      if (!rule || !incident || !channel) {
        await alertsOf(store).deliveryDone(d.uuid, {
          state: "failed",
          error: "the rule changed",
          delivered: null,
        });
        continue;
      }
      const attempts = d.attempts + 1;
      try {
        await this.send(channel, rule, incident, d);
        await alertsOf(store).deliveryDone(d.uuid, {
          state: "delivered",
          error: "",
          delivered: this.deps.now(),
        });
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        const final = err instanceof OutboundRefused || attempts >= this.deps.maxAttempts;
        if (final)
          await alertsOf(store).deliveryDone(d.uuid, { state: "failed", error: message, delivered: null });
        else await alertsOf(store).deliveryFailedAttempt(d.uuid, message);
      }
    }
  }

  private async send(
    channel: Channel,
    rule: AlertRuleRow,
    incident: AlertIncidentRow,
    d: AlertDeliveryRow,
  ): Promise<void> {
    const resolved = d.event === "resolved";
    const title = `[${resolved ? "RESOLVED" : "FIRING"}] ${rule.name}: ${incident.summary}`;
    const lasted =
      resolved && incident.resolved !== null
        ? ` (after ${Math.max(1, Math.round((incident.resolved - incident.started) / 60_000))} min)`
        : "";
    const link = `${this.deps.publicUrl}${incident.subject}`;
    if (channel.type === "email") {
      const message: MailMessage = {
        to: channel.to,
        subject: `${title}${lasted}`,
        text: [
          `${title}${lasted}`,
          "",
          `Namespace: ${rule.namespace}`,
          `Object: ${link}`,
          `Started: ${new Date(incident.started).toISOString()}`,
          ...(incident.resolved === null ? [] : [`Resolved: ${new Date(incident.resolved).toISOString()}`]),
          `Rule: ${this.deps.publicUrl}${alertUri(rule)}`,
        ].join("\n"),
      };
      await this.deps.outbox.send(message);
      return;
    }
    const body =
      channel.format === "slack"
        ? { text: `${title}${lasted}\n<${link}|${incident.subject}>` }
        : {
            event: d.event,
            namespace: rule.namespace,
            alert: { uuid: rule.uuid, name: rule.name, kind: rule.kind, resource_uri: alertUri(rule) },
            incident: {
              uuid: incident.uuid,
              subject: incident.subject,
              summary: incident.summary,
              state: incident.resolved === null ? "firing" : "resolved",
              started: new Date(incident.started).toISOString(),
              resolved: incident.resolved === null ? null : new Date(incident.resolved).toISOString(),
            },
          };
    const text = JSON.stringify(body);
    const res = await outboundRequest(this.deps.webhooks, new URL(channel.url), {
      method: "POST",
      headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(text)) },
      body: text,
    });
    if (res.status < 200 || res.status >= 300)
      throw new Error(`the webhook answered ${res.status}${res.body ? `: ${res.body.slice(0, 200)}` : ""}`);
  }
}
