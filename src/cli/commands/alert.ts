// `berth alert …`: a namespace's alert rules (issue 32): create one with its channels (webhooks,
// Slack-compatible webhooks, email), list them, turn them off and on, remove them, and read when
// each held (incidents) and what was sent (deliveries).
import type { Command } from "commander";
import {
  ALERT_KINDS,
  type AlertChannelBody,
  type AlertCreateBody,
  type AlertKind,
  type AlertParams,
  type AlertView,
} from "../../contract/alert.ts";
import { API } from "../client.ts";
import type { Ctx } from "../context.ts";
import { CliError, usageError } from "../errors.ts";
import { short } from "../output.ts";
import { collect, quietOption } from "./common.ts";

const KINDS: readonly string[] = ALERT_KINDS;

interface Incident {
  uuid: string;
  subject: string;
  summary: string;
  state: string;
  started: string | null;
  resolved: string | null;
}

interface Delivery {
  uuid: string;
  event: string;
  target: string;
  state: string;
  attempts: number;
  last_error: string;
  created: string | null;
}

function count(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw usageError(`${name} must be a whole number of at least 1`);
  return n;
}

export function registerAlert(program: Command, ctx: (cmd: Command) => Ctx): void {
  const alert = program
    .command("alert")
    .description("alert rules: what to watch in a namespace and where to send notifications");
  const base = (c: Ctx) => c.client.collection(API.app, "alert");
  const find = async (c: Ctx, ref: string): Promise<AlertView> => {
    const all = (await c.client.get<{ objects?: AlertView[] }>(base(c), { limit: 1000 })).objects ?? [];
    const matches = all.filter((a) => a.name === ref || a.uuid === ref || a.uuid.startsWith(ref));
    if (matches.length !== 1)
      throw new CliError(
        matches.length ? `alert ${ref} is ambiguous; use more of its uuid` : `alert ${ref} not found`,
      );
    return matches[0]!;
  };

  alert
    .command("create <name>")
    .description(`create a rule; --kind is one of ${KINDS.join(", ")}`)
    .requiredOption("-k, --kind <kind>", "what to watch")
    .option("--webhook <url>", "POST the incident as JSON to this URL (repeatable)", collect, [])
    .option("--slack <url>", "POST {text} to this Slack-compatible webhook (repeatable)", collect, [])
    .option("--email <address>", "mail this address (repeatable)", collect, [])
    .option("--threshold <percent>", "memory_high: percent of the memory limit (default 90)")
    .option("--for <minutes>", "memory_high: for how long (default 5)")
    .option("--restarts <n>", "crash_looping: restarts (default 3)")
    .option("--window <minutes>", "crash_looping: within this window (default 10)")
    .option("--days <n>", "certificate_expiring: days before expiry (default 14)")
    .option("--disabled", "create it turned off")
    .action(
      async (name: string, o: Record<string, string | string[] | boolean | undefined>, cmd: Command) => {
        const c = ctx(cmd);
        const kind = String(o.kind);
        if (!KINDS.includes(kind)) throw usageError(`--kind must be one of ${KINDS.join(", ")}`);
        const channels: AlertChannelBody[] = [
          ...(o.webhook as string[]).map((url) => ({
            type: "webhook" as const,
            url,
            format: "json" as const,
          })),
          ...(o.slack as string[]).map((url) => ({
            type: "webhook" as const,
            url,
            format: "slack" as const,
          })),
          ...(o.email as string[]).map((to) => ({ type: "email" as const, to })),
        ];
        if (!channels.length) throw usageError("name at least one --webhook, --slack or --email");
        const params: AlertParams = {};
        const set = (key: keyof AlertParams, flag: string) => {
          const n = count(`--${flag}`, o[flag] as string | undefined);
          if (n !== undefined) params[key] = n;
        };
        set("threshold_percent", "threshold");
        set("for_minutes", "for");
        set("restarts", "restarts");
        set("window_minutes", "window");
        set("days", "days");
        const body: AlertCreateBody = {
          name,
          kind: kind as AlertKind,
          params,
          channels,
          enabled: !o.disabled,
        };
        const made = (await c.client.request<AlertView>("POST", base(c), { body })).body;
        if (c.out.opts.json) return c.out.json(made);
        c.out.line(made.uuid);
      },
    );

  alert
    .command("ls")
    .description("list the namespace's rules")
    .addOption(quietOption())
    .action(async (_o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      c.out.list(await c.client.get<{ objects: AlertView[] }>(base(c), { limit: 1000 }), [
        { header: "UUID", value: (a) => short(a.uuid) },
        { header: "NAME", value: (a) => a.name },
        { header: "KIND", value: (a) => a.kind },
        { header: "ENABLED", value: (a) => (a.enabled ? "yes" : "no") },
        { header: "FIRING", value: (a) => String(a.firing) },
        { header: "CHANNELS", value: (a) => a.channels.map((ch: { target: string }) => ch.target).join(" ") },
      ]);
    });

  for (const [verb, enabled] of [
    ["enable", true],
    ["disable", false],
  ] as const) {
    alert
      .command(`${verb} <alert...>`)
      .description(`turn rules ${enabled ? "on" : "off"} (by name, uuid or uuid prefix)`)
      .action(async (refs: string[], _o: unknown, cmd: Command) => {
        const c = ctx(cmd);
        for (const ref of refs) {
          const a = await find(c, ref);
          await c.client.request("PATCH", `${base(c)}${a.uuid}/`, { body: { enabled } });
          c.out.line(a.uuid);
        }
      });
  }

  alert
    .command("rm <alert...>")
    .description("delete rules with their incidents and delivery log")
    .action(async (refs: string[], _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      for (const ref of refs) {
        const a = await find(c, ref);
        await c.client.request("DELETE", `${base(c)}${a.uuid}/`);
        c.out.line(a.uuid);
      }
    });

  alert
    .command("incidents <alert>")
    .description("when the rule's condition held, newest first")
    .addOption(quietOption())
    .action(async (ref: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const a = await find(c, ref);
      c.out.list(
        await c.client.get<{ objects: Incident[] }>(`${base(c)}${a.uuid}/incidents/`, { limit: 100 }),
        [
          { header: "UUID", value: (i) => short(i.uuid) },
          { header: "STATE", value: (i) => i.state },
          { header: "STARTED", value: (i) => i.started ?? "" },
          { header: "RESOLVED", value: (i) => i.resolved ?? "" },
          { header: "SUMMARY", value: (i) => i.summary },
        ],
      );
    });

  alert
    .command("deliveries <alert>")
    .description("every notification sent for the rule, its attempts and outcome")
    .addOption(quietOption())
    .action(async (ref: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const a = await find(c, ref);
      c.out.list(
        await c.client.get<{ objects: Delivery[] }>(`${base(c)}${a.uuid}/deliveries/`, { limit: 100 }),
        [
          { header: "UUID", value: (d) => short(d.uuid) },
          { header: "EVENT", value: (d) => d.event },
          { header: "TARGET", value: (d) => d.target },
          { header: "STATE", value: (d) => d.state },
          { header: "ATTEMPTS", value: (d) => String(d.attempts) },
          { header: "ERROR", value: (d) => d.last_error },
        ],
      );
    });
}
