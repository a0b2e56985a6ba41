// `berth action …` (ls with filters, inspect, logs [-f], cancel, retry) and `berth event` (the
// events stream: one line per event, or JSON lines).

import type { Command } from "commander";
import type { Action } from "../../contract/action.ts";
import { canonicalUri, parseObjectUri } from "../../domain/uri.ts";
import { API, type Query } from "../client.ts";
import { type Ctx, finish } from "../context.ts";
import { CliError, usageError } from "../errors.ts";
import { ago, type Column, elapsed, lastSegment, short } from "../output.ts";
import { KINDS, type Kind, resolve } from "../resolve.ts";
import { printLogs } from "../streams.ts";
import { inspect, quietOption, syncOption, wholeNumber } from "./common.ts";

/** The fields of an event of the audit stream (spec "Events") the CLI prints. */
interface AuditEvent {
  datetime?: string;
  type?: string;
  action?: string;
  state?: string;
  resource_uri?: string;
}

/** `/api/app/v1/alice/service/<uuid>/` → `service 1a2b3c4d`. */
export function objectLabel(uri: unknown): string {
  if (typeof uri !== "string" || uri === "") return "";
  const parsed = parseObjectUri(uri);
  return parsed && /^[0-9a-f-]{36}$/.test(parsed.id) ? `${parsed.resource} ${short(parsed.id)}` : uri;
}

export const ACTION_COLUMNS: Column<Action>[] = [
  { header: "UUID", value: (a) => short(a.uuid) },
  { header: "ACTION", value: (a) => a.action },
  { header: "OBJECT", value: (a) => objectLabel(a.object) },
  { header: "STATE", value: (a) => a.state, state: true },
  { header: "STARTED", value: (a) => ago(a.start_date) },
  { header: "DURATION", value: (a) => elapsed(a.start_date, a.end_date) },
  { header: "USER", value: (a) => a.user },
];

const OBJECT_KINDS: Kind[] = [KINDS.service, KINDS.stack, KINDS.container, KINDS.nodecluster, KINDS.node];

/** A resource URI as it is, or the first service, stack, container, cluster or node of that name. */
async function objectUri(c: Ctx, ref: string): Promise<string> {
  if (ref.startsWith("/api/")) return canonicalUri(ref);
  for (const kind of OBJECT_KINDS) {
    try {
      return (await resolve(c.client, kind, ref)).resource_uri;
    } catch (err) {
      if (!(err instanceof CliError) || !/not found/.test(err.message)) throw err;
    }
  }
  throw new CliError(`no service, stack, container, node cluster or node is called ${ref}`);
}

interface ListOptions {
  state?: string;
  object?: string;
  includeRelated?: boolean;
  since?: string;
  until?: string;
  last: number;
}

/** `2026-11-22`, `2026-11-22T10:00:00Z` or an API timestamp → the API's form. */
function timestamp(value: string): string {
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw usageError(`not a date: ${value}`);
  return new Date(ms).toUTCString().replace("GMT", "+0000");
}

export function registerAction(program: Command, ctx: (cmd: Command) => Ctx): void {
  const action = program.command("action").description("actions: the audit log of every change");
  const kind = KINDS.action;
  const actions = (c: Ctx) => c.client.collection(API.audit, "action");

  action
    .command("ls")
    .description("list actions, newest first")
    .addOption(quietOption())
    .option("-s, --state <state>", "Pending, In progress, Canceling, Canceled, Success or Failed")
    .option("-o, --object <identifier>", "only actions on this object (a name, uuid or resource URI)")
    .option(
      "-r, --include-related",
      "with --object: also actions on related objects (containers of a service, …)",
    )
    .option("--since <date>", "started at or after this date")
    .option("--until <date>", "started at or before this date")
    .option("-n, --last <n>", "how many (default 25)", wholeNumber, 25)
    .action(async (o: ListOptions, cmd: Command) => {
      const c = ctx(cmd);
      if (o.includeRelated && !o.object) throw usageError("--include-related needs --object");
      const query: Query = { order_by: "-start_date", limit: Math.max(1, Math.min(o.last, 1000)) };
      if (o.state) query.state = o.state;
      if (o.object) query.object = await objectUri(c, o.object);
      if (o.includeRelated) query.include_related = true;
      if (o.since) query.start_date__gte = timestamp(o.since);
      if (o.until) query.start_date__lte = timestamp(o.until);
      c.out.list(await c.client.get<{ objects: Action[] }>(actions(c), query), ACTION_COLUMNS);
    });
  inspect(action, ctx, kind);
  action
    .command("logs <identifier>")
    .description("an action's log")
    .option("-f, --follow", "keep printing lines until the action ends")
    .option("--tail <n>", "lines from the end to print first (default 300)", wholeNumber)
    .action(async (ref: string, o: { follow?: boolean; tail?: number }, cmd: Command) => {
      const c = ctx(cmd);
      const a = await resolve(c.client, kind, ref);
      await printLogs(c.client, c.out, `${a.resource_uri}logs/`, {
        follow: o.follow === true,
        tail: o.tail,
        addNewline: true,
      });
    });
  action
    .command("cancel <identifier...>")
    .description("cancel Pending or In progress actions")
    .addOption(syncOption())
    .action(async (refs: string[], o: { sync?: boolean }, cmd: Command) => {
      const c = ctx(cmd);
      for (const ref of refs) {
        const a = await resolve(c.client, kind, ref);
        const reply = await c.client.request("POST", `${a.resource_uri}cancel/`);
        // --sync waits for the canceled action to stop (Canceling ends after its current step);
        // Canceled is what was asked, so it is a success here.
        while (o.sync) {
          const now = (await c.client.get(a.resource_uri)) as { state?: string };
          if (!["Canceling", "In progress", "Pending"].includes(now.state ?? "")) break;
          await new Promise((r) => setTimeout(r, 200));
        }
        await finish(c, reply, {});
      }
    });
  action
    .command("retry <identifier>")
    .description("repeat a finished action's operation (a new action)")
    .addOption(syncOption())
    .action(async (ref: string, o: { sync?: boolean }, cmd: Command) => {
      const c = ctx(cmd);
      const a = await resolve(c.client, kind, ref);
      const reply = await c.client.request<Action>("POST", `${a.resource_uri}retry/`);
      await finish(c, reply, { sync: o.sync, refetch: reply.body?.resource_uri });
    });

  program
    .command("event")
    .alias("events")
    .description("follow the events stream: one line per change (or JSON lines with --json)")
    .option(
      "-t, --type <types>",
      "only these types: stack, service, container, node, nodecluster, action (comma-separated)",
    )
    .option("-o, --object <identifier>", "only events of this object (a name, uuid or resource URI)")
    .option("--parents <identifier>", "only events of objects under this one (a service's containers, …)")
    .option("--since <revision>", "replay from this revision (each JSON event carries its revision)")
    .option("-n, --count <n>", "exit after this many events", wholeNumber)
    .action(
      async (
        o: { type?: string; object?: string; parents?: string; since?: string; count?: number },
        cmd: Command,
      ) => {
        const c = ctx(cmd);
        const query: Query = {};
        if (o.type) query.type = o.type;
        if (o.object) query.object = await objectUri(c, o.object);
        if (o.parents) query.parents = await objectUri(c, o.parents);
        if (o.since !== undefined) query.since = o.since;
        let seen = 0;
        let done: (() => void) | undefined;
        const enough = new Promise<void>((r) => {
          done = r;
        });
        const stream = await c.client.connect(
          `${c.client.collection(API.audit, "events")}`,
          query,
          (data, binary) => {
            if (binary || (o.count !== undefined && seen >= o.count)) return;
            let e: AuditEvent;
            try {
              e = JSON.parse(data.toString());
            } catch {
              return;
            }
            seen++;
            if (c.out.opts.json) c.out.line(JSON.stringify(e));
            else
              c.out.line(
                [
                  e.datetime,
                  e.type,
                  e.action,
                  c.out.state(e.state ?? ""),
                  objectLabel(e.resource_uri) || lastSegment(e.resource_uri),
                ]
                  .join("  ")
                  .trimEnd(),
              );
            if (o.count !== undefined && seen >= o.count) done?.();
          },
        );
        const closed = await Promise.race([stream.closed, enough.then(() => undefined)]);
        stream.ws.close();
        if (closed && closed.code !== 1000)
          throw new CliError(`the events stream closed (${closed.code} ${closed.reason})`);
      },
    );
}
