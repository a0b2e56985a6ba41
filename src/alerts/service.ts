// Alert rules of a namespace (issue 32): created, listed, changed and removed through the API;
// their channels are sealed at rest (a webhook URL may carry a secret, as Slack's do) and shown
// with only the webhook's origin. A webhook URL must pass the outbound guard when the rule is
// created (and again at every delivery, when it is resolved anew): loopback, link-local, private
// and reserved addresses are refused unless BERTH_ALERT_WEBHOOK_ALLOW names them.
import { randomUUID } from "node:crypto";
import type {
  AlertChannelBody,
  AlertCreateBody,
  AlertKind,
  AlertParams,
  AlertPatchBody,
  AlertView,
} from "../contract/alert.ts";
import { badRequest } from "../domain/errors.ts";
import { restTime } from "../domain/time.ts";
import type { SecretBox } from "../identity/secret-box.ts";
import {
  OutboundFailed,
  type OutboundPolicy,
  OutboundRefused,
  resolveAllowed,
} from "../registry/outbound.ts";
import type { AlertDeliveryRow, AlertIncidentRow, AlertRuleRow } from "../store/alerts.ts";
import { alertsOf } from "../store/alerts.ts";
import { decodeAlertChannels, decodeAlertParams } from "../store/codec.ts";
import type { Store } from "../store/store.ts";
import type { Conditions, RuleFacts } from "./conditions.ts";

export type Channel = AlertChannelBody;

export function alertUri(r: { namespace: string; uuid: string }): string {
  return `/api/app/v1/${r.namespace}/alert/${r.uuid}/`;
}

/** How a channel is shown: an address, or a webhook's origin (its path and query may be a secret). */
export function channelTarget(c: Channel): string {
  if (c.type === "email") return `email ${c.to}`;
  try {
    return `webhook ${new URL(c.url).origin}/…`;
  } catch {
    return "webhook (invalid URL)";
  }
}

export interface AlertDeps {
  store: Store;
  box: SecretBox;
  conditions: Conditions;
  webhooks: OutboundPolicy;
  now(): number;
}

export class AlertService {
  constructor(private readonly deps: AlertDeps) {}

  channelsOf(rule: AlertRuleRow): Channel[] {
    return decodeAlertChannels(this.deps.box.open(rule.channels));
  }

  facts(rule: AlertRuleRow): RuleFacts {
    return {
      uuid: rule.uuid,
      namespace: rule.namespace,
      kind: rule.kind as AlertKind,
      params: decodeAlertParams(rule.params) as AlertParams,
      created: rule.created,
    };
  }

  /** Refuses a webhook Berth would not call (400 naming the channel), before anything is stored. */
  private async checkChannels(channels: Channel[]): Promise<void> {
    for (const [i, c] of channels.entries()) {
      if (c.type !== "webhook") continue;
      const field = `channels[${i}].url`;
      let url: URL;
      try {
        url = new URL(c.url);
      } catch {
        throw badRequest(
          `${field} is not a URL.`,
          [{ field, problem: "must be an http(s) URL" }],
          "invalid_field",
        );
      }
      if (url.protocol !== "http:" && url.protocol !== "https:")
        throw badRequest(
          `${field} must be an http(s) URL.`,
          [{ field, problem: "must be an http(s) URL" }],
          "invalid_field",
        );
      try {
        await resolveAllowed(this.deps.webhooks, url.hostname.replace(/^\[|\]$/g, ""));
      } catch (err) {
        if (err instanceof OutboundRefused || err instanceof OutboundFailed)
          throw badRequest(`${field}: ${err.message}.`, [{ field, problem: err.message }], "webhook_refused");
        throw err;
      }
    }
  }

  async create(namespace: string, body: AlertCreateBody, createdBy: string): Promise<AlertRuleRow> {
    if (!this.deps.conditions.has(body.kind))
      throw badRequest(
        `${body.kind} alerts need a part of Berth that is not running here (the router's certificates).`,
        [{ field: "kind", problem: "not available on this installation" }],
        "alert_kind_unavailable",
      );
    await this.checkChannels(body.channels);
    const channels = body.channels.map((c) =>
      c.type === "webhook" ? { ...c, format: c.format ?? "json" } : c,
    );
    return alertsOf(this.deps.store).insertRule({
      uuid: randomUUID(),
      namespace,
      name: body.name,
      kind: body.kind,
      params: JSON.stringify(body.params ?? {}),
      channels: this.deps.box.seal(JSON.stringify(channels)),
      enabled: body.enabled === false ? 0 : 1,
      created_by: createdBy,
      created: this.deps.now(),
    });
  }

  async update(rule: AlertRuleRow, patch: AlertPatchBody): Promise<AlertRuleRow> {
    const changes: Partial<Pick<AlertRuleRow, "name" | "enabled">> = {};
    if (patch.name !== undefined) changes.name = patch.name;
    if (patch.enabled !== undefined) changes.enabled = patch.enabled ? 1 : 0;
    if (Object.keys(changes).length) await alertsOf(this.deps.store).updateRule(rule.uuid, changes);
    return { ...rule, ...changes };
  }

  async view(rule: AlertRuleRow): Promise<AlertView> {
    const open = await alertsOf(this.deps.store).openIncidents(rule.uuid);
    return {
      uuid: rule.uuid,
      name: rule.name,
      kind: rule.kind,
      params: decodeAlertParams(rule.params),
      channels: this.channelsOf(rule).map((c) => ({
        type: c.type,
        format: c.type === "webhook" ? (c.format ?? "json") : null,
        target: channelTarget(c).replace(/^(webhook|email) /, ""),
      })),
      enabled: rule.enabled === 1,
      firing: open.length,
      created: restTime(rule.created),
      resource_uri: alertUri(rule),
    };
  }
}

export function incidentView(i: AlertIncidentRow) {
  return {
    uuid: i.uuid,
    subject: i.subject,
    summary: i.summary,
    state: i.resolved === null ? "firing" : "resolved",
    started: restTime(i.started),
    resolved: restTime(i.resolved),
  };
}

export function deliveryView(d: AlertDeliveryRow) {
  return {
    uuid: d.uuid,
    incident: d.incident_uuid,
    event: d.event,
    target: d.target,
    state: d.state,
    attempts: d.attempts,
    last_error: d.last_error,
    created: restTime(d.created),
    delivered: restTime(d.delivered),
  };
}
