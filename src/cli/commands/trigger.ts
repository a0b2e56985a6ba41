// `berth trigger …`: a service's triggers (secret URLs that redeploy or scale it) and
// `berth tag …`: tags of services, node clusters and nodes.
import type { Command } from "commander";
import type { Node, NodeCluster } from "../../contract/nodes.ts";
import type { Service } from "../../contract/service.ts";
import {
  TRIGGER_OPERATIONS,
  type Trigger,
  type TriggerCreateBody,
  type TriggerOperation,
} from "../../contract/trigger.ts";
import type { Ctx } from "../context.ts";
import { CliError, usageError } from "../errors.ts";
import { short } from "../output.ts";
import { KINDS, type Kind, resolve } from "../resolve.ts";
import { collect, quietOption } from "./common.ts";

const OPERATIONS: readonly string[] = TRIGGER_OPERATIONS;

export function registerTrigger(program: Command, ctx: (cmd: Command) => Ctx): void {
  const trigger = program
    .command("trigger")
    .description("service triggers: URLs that redeploy or scale a service");
  const triggersOf = async (c: Ctx, ref: string) => {
    const s = await resolve(c.client, KINDS.service, ref);
    return { service: s, path: `${c.client.collection(KINDS.service.prefix, "service")}${s.uuid}/trigger/` };
  };
  trigger
    .command("create <service>")
    .description("create a trigger; prints its URL (it holds the trigger's secret)")
    .option("-n, --name <name>", "trigger name")
    .option("-o, --operation <operation>", `${OPERATIONS.join(" | ")} (default REDEPLOY)`)
    .action(async (ref: string, o: { name?: string; operation?: string }, cmd: Command) => {
      const c = ctx(cmd);
      const { path } = await triggersOf(c, ref);
      const body: TriggerCreateBody = {};
      if (o.name) body.name = o.name;
      if (o.operation) {
        const op = o.operation.toUpperCase();
        if (!OPERATIONS.includes(op)) throw usageError(`--operation must be one of ${OPERATIONS.join(", ")}`);
        body.operation = op as TriggerOperation;
      }
      const made: Trigger = (await c.client.request<Trigger>("POST", path, { body })).body;
      if (c.out.opts.json) return c.out.json(made);
      c.out.line(made.url);
    });
  trigger
    .command("ls <service>")
    .description("list a service's triggers")
    .addOption(quietOption())
    .action(async (ref: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const { path } = await triggersOf(c, ref);
      c.out.list(await c.client.get<{ objects: Trigger[] }>(path, { limit: 1000 }), [
        { header: "UUID", value: (t) => short(t.uuid) },
        { header: "NAME", value: (t) => t.name },
        { header: "OPERATION", value: (t) => t.operation },
        { header: "URL", value: (t) => t.url },
      ]);
    });
  trigger
    .command("rm <service> <trigger...>")
    .description("delete triggers (by name, uuid or uuid prefix)")
    .action(async (ref: string, names: string[], _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const { path } = await triggersOf(c, ref);
      const all = (await c.client.get<{ objects?: Trigger[] }>(path, { limit: 1000 })).objects ?? [];
      for (const name of names) {
        const matches = all.filter((t) => t.name === name || t.uuid === name || t.uuid.startsWith(name));
        if (matches.length !== 1)
          throw new CliError(
            matches.length
              ? `trigger ${name} is ambiguous; use more of its uuid`
              : `trigger ${name} not found`,
          );
        const [match] = matches as [Trigger];
        await c.client.request("DELETE", `${path}${match.uuid}/`);
        c.out.line(match.uuid);
      }
    });
}

/** The object a tag command names: a service, a node cluster or a node, tried in that order. */
type Taggable = Service | NodeCluster | Node;
const label = (obj: Taggable): string =>
  "name" in obj
    ? obj.name
    : "external_fqdn" in obj && obj.external_fqdn
      ? obj.external_fqdn
      : short(obj.uuid);

async function taggable(c: Ctx, ref: string): Promise<{ kind: Kind; obj: Taggable }> {
  const kinds: Kind<Taggable>[] = [KINDS.service, KINDS.nodecluster, KINDS.node];
  for (const kind of kinds) {
    try {
      return { kind, obj: await resolve(c.client, kind, ref) };
    } catch (err) {
      if (!(err instanceof CliError) || !/not found/.test(err.message)) throw err;
    }
  }
  throw new CliError(`no service, node cluster or node is called ${ref}`);
}

export function registerTag(program: Command, ctx: (cmd: Command) => Ctx): void {
  const tag = program.command("tag").description("tags of services, node clusters and nodes");
  const names = (obj: Taggable): string[] =>
    (obj.tags ?? []).map((t: string | { name: string }) => (typeof t === "string" ? t : t.name));
  const change = (
    verb: string,
    description: string,
    next: (current: string[], given: string[]) => string[],
  ) =>
    tag
      .command(`${verb} <identifier...>`)
      .description(description)
      .requiredOption("-t, --tag <tag>", "a tag (repeatable)", collect)
      .action(async (refs: string[], o: { tag: string[] }, cmd: Command) => {
        const c = ctx(cmd);
        for (const ref of refs) {
          const { obj } = await taggable(c, ref);
          const tags = next(names(obj), o.tag);
          await c.client.request("PATCH", obj.resource_uri, {
            body: { tags: tags.map((name) => ({ name })) },
          });
          c.out.line(obj.uuid);
        }
      });
  change("add", "add tags", (current, given) => [...current, ...given.filter((t) => !current.includes(t))]);
  change("rm", "remove tags", (current, given) => current.filter((t) => !given.includes(t)));
  change("set", "replace all tags with these", (_current, given) => [...new Set(given)]);
  tag
    .command("ls <identifier...>")
    .description("list the tags of objects")
    .action(async (refs: string[], _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const found = [];
      for (const ref of refs) found.push(await taggable(c, ref));
      if (c.out.opts.json) return c.out.json(found.map(({ obj }) => ({ uuid: obj.uuid, tags: names(obj) })));
      c.out.table(
        [
          { header: "IDENTIFIER", value: (f) => label(f.obj) },
          { header: "TYPE", value: (f) => f.kind.label },
          { header: "TAGS", value: (f) => names(f.obj).join(" ") },
        ],
        found,
      );
    });
}
