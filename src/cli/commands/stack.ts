// `berth stack …` and `berth up`: stacks from stack files (YAML or JSON), ls, inspect, export,
// start, stop, redeploy, terminate.
import fs from "node:fs";
import type { Command } from "commander";
import YAML from "yaml";
import type { Stack, StackCreateBody, StackUpdateBody } from "../../contract/stack.ts";
import { type Ctx, finish } from "../context.ts";
import { CliError } from "../errors.ts";
import { ago, type Column, short } from "../output.ts";
import { KINDS, resolve } from "../resolve.ts";
import { explain, readStackFile, type StackFile } from "../stackfile.ts";
import { bulk, failingOption, inspect, operation, quietOption, syncOption, terminate } from "./common.ts";

export const STACK_COLUMNS: Column<Stack>[] = [
  { header: "NAME", value: (s) => s.name },
  { header: "UUID", value: (s) => short(s.uuid) },
  { header: "STATUS", value: (s) => s.state, state: true },
  { header: "#SERVICES", value: (s) => s.services.length },
  { header: "DEPLOYED", value: (s) => ago(s.deployed_datetime) },
  { header: "DESTROYED", value: (s) => ago(s.destroyed_datetime) },
];

interface FileOptions {
  file?: string;
  name?: string;
  sync?: boolean;
}

const readStdin = () => fs.readFileSync(0, "utf8");

function load(o: FileOptions): StackFile {
  return readStackFile(o.file, process.cwd(), readStdin);
}

async function send<T>(file: StackFile, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw explain(file, err);
  }
}

const STARTABLE = new Set(["Not Running", "Stopped"]);

/** Creates and starts the stack; when a live stack of that name exists, updates and redeploys it. */
export async function stackUp(c: Ctx, o: FileOptions): Promise<void> {
  const file = load(o);
  const base = c.client.collection(KINDS.stack.prefix, KINDS.stack.resource);
  const name = o.name ?? file.name ?? file.defaultName;
  const existing = (await c.client.all<Stack>(base, { name })).find(
    (s) => s.state !== "Terminated" && s.state !== "Terminating",
  );
  if (!existing) {
    const created = await send(file, () =>
      c.client.request<Stack>("POST", base, {
        body: { name, services: file.services } satisfies StackCreateBody,
      }),
    );
    const started = await c.client.request("POST", `${base}${created.body.uuid}/start/`);
    await finish(c, started, { sync: o.sync, refetch: `${base}${created.body.uuid}/` });
    return;
  }
  const uri = `${base}${existing.uuid}/`;
  const update: StackUpdateBody = { services: file.services };
  await send(file, () => c.client.request("PATCH", uri, { body: update }));
  const fresh = await c.client.get<Stack>(uri);
  const verb = STARTABLE.has(fresh.state) ? "start" : "redeploy";
  await finish(c, await c.client.request("POST", `${uri}${verb}/`), { sync: o.sync, refetch: uri });
}

const fileOption = (cmd: Command) =>
  cmd.option(
    "-f, --file <file>",
    "stack file, YAML or JSON (- for standard input; default berth.yml or docker-cloud.yml here)",
  );

export function registerStack(program: Command, ctx: (cmd: Command) => Ctx): void {
  const stack = program.command("stack").description("stacks: groups of linked services");
  const kind = KINDS.stack;
  const base = (c: Ctx) => c.client.collection(kind.prefix, kind.resource);

  stack
    .command("ls")
    .alias("ps")
    .description("list stacks")
    .addOption(quietOption())
    .option("-a, --all", "include terminated stacks")
    .addOption(failingOption("a service crashed, unhealthy or partly running, or the stack partly running"))
    .action(async (o: { all?: boolean; failing?: boolean }, cmd: Command) => {
      const c = ctx(cmd);
      const query = { failing: o.failing || undefined };
      const objects = (await c.client.all<Stack>(base(c), query)).filter(
        (s) => o.all || s.state !== "Terminated",
      );
      c.out.list(objects, STACK_COLUMNS);
    });

  fileOption(stack.command("create").description("create a stack from a stack file (not started)"))
    .option("-n, --name <name>", "stack name (default: the file's name, or its folder for berth.yml)")
    .action(async (o: FileOptions, cmd: Command) => {
      const c = ctx(cmd);
      const file = load(o);
      const body: StackCreateBody = {
        name: o.name ?? file.name ?? file.defaultName,
        services: file.services,
      };
      const created = await send(file, () => c.client.request("POST", base(c), { body }));
      c.out.done(created.body);
    });

  const up = (cmd: Command) =>
    fileOption(cmd)
      .option("-n, --name <name>", "stack name (default: the file's name, or its folder for berth.yml)")
      .addOption(syncOption())
      .action((o: FileOptions, command: Command) => stackUp(ctx(command), o));
  up(
    stack.command("up").description("create and start a stack from a stack file (or update and redeploy it)"),
  );
  up(
    program
      .command("up")
      .description("stack up with the stack file of this folder (berth.yml, docker-cloud.yml)"),
  );

  fileOption(stack.command("update <identifier>").description("update a stack's services from a stack file"))
    .addOption(syncOption())
    .action(async (ref: string, o: FileOptions, cmd: Command) => {
      const c = ctx(cmd);
      const file = load(o);
      const s = await resolve(c.client, kind, ref);
      const uri = `${base(c)}${s.uuid}/`;
      const reply = await send(file, () =>
        c.client.request("PATCH", uri, { body: { services: file.services } satisfies StackUpdateBody }),
      );
      await finish(c, reply, { sync: o.sync, refetch: uri });
    });

  stack
    .command("export <identifier>")
    .description("a stack as a stack file (YAML; --json for JSON)")
    .option("-f, --file <file>", "write it to this file instead of standard output")
    .action(async (ref: string, o: { file?: string }, cmd: Command) => {
      const c = ctx(cmd);
      const s = await resolve(c.client, kind, ref);
      const doc = await c.client.get(`${base(c)}${s.uuid}/export/`);
      const text =
        c.out.opts.json || o.file?.endsWith(".json")
          ? `${JSON.stringify(doc, null, 2)}\n`
          : YAML.stringify(doc);
      if (!o.file) return c.out.write(text);
      try {
        fs.writeFileSync(o.file, text);
      } catch (err) {
        throw new CliError(`cannot write ${o.file}: ${(err as Error).message}`);
      }
    });

  inspect(stack, ctx, kind);
  operation(stack, ctx, kind, "start", "start stacks' services");
  operation(stack, ctx, kind, "stop", "stop stacks' services");
  terminate(stack, ctx, kind, "terminate", "terminate stacks and their services (not reversible)");
  stack
    .command("redeploy <identifier...>")
    .description("redeploy stacks' services")
    .option("--not-reuse-volumes", "give the new containers fresh volumes")
    .addOption(syncOption())
    .action((refs: string[], o: { notReuseVolumes?: boolean; sync?: boolean }, cmd: Command) =>
      bulk(ctx(cmd), kind, refs, o, (client, s, b) =>
        client.request("POST", `${b}${s.uuid}/redeploy/`, {
          query: o.notReuseVolumes ? { reuse_volumes: false } : {},
        }),
      ),
    );
}
