// Option helpers shared by the nouns' command files.
import { type Command, InvalidArgumentError, Option } from "commander";
import { type Client, type Reply, uuidOf } from "../client.ts";
import { type Ctx, finish } from "../context.ts";
import { CliError } from "../errors.ts";
import { KINDS, type Kind, type Named, resolve } from "../resolve.ts";

/** Repeatable option values (`-e A=1 -e B=2`). */
export const collect = (value: string, previous: string[] | undefined): string[] => [
  ...(previous ?? []),
  value,
];

export function wholeNumber(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError("must be a whole number");
  return Number(value);
}

export function choice(name: string, values: readonly string[]) {
  return (value: string): string => {
    const v = value.toUpperCase();
    const found = values.find((x) => x.toUpperCase() === v);
    if (!found) throw new InvalidArgumentError(`${name} must be one of ${values.join(", ")}`);
    return found;
  };
}

export const syncOption = () =>
  new Option("--sync", "wait for the action to end, streaming its log (non-zero exit unless it succeeds)");
export const quietOption = () => new Option("-q, --quiet", "print only uuids");
/** `ls --failing`: the list's `failing=true` filter (why each kind counts as failing, in `why`). */
/** The options of a list with `-s`, `-a` and `--failing`. */
export interface ListOptions {
  status?: string;
  all?: boolean;
  failing?: boolean;
}
export const failingOption = (why: string) => new Option("--failing", `only those that fail: ${why}`);

/** `verb <identifier...>` on one kind, one request per object; prints each uuid (or JSON). */
export function bulk<T extends Named>(
  c: Ctx,
  kind: Kind<T>,
  refs: readonly string[],
  opts: { sync?: boolean },
  call: (client: Client, obj: T, base: string) => Promise<Reply>,
): Promise<void> {
  const base = c.client.collection(kind.prefix, kind.resource);
  return (async () => {
    let failed: CliError | undefined;
    for (const ref of refs) {
      try {
        const obj = await resolve(c.client, kind, ref);
        const reply = await call(c.client, obj, base);
        await finish(c, reply, { sync: opts.sync, refetch: `${base}${obj.uuid}/` });
      } catch (err) {
        // Like the historical CLI: go on with the other objects, report each failure, exit non-zero.
        if (!(err instanceof CliError) || refs.length === 1) throw err;
        c.out.note(err.message);
        failed = err;
      }
    }
    if (failed) throw new CliError(`${kind.label} operation failed on some objects`, failed.exitCode);
  })();
}

/** Registers `<verb> <identifier...>` for a POST operation (`start/`, `stop/`, …). */
export function operation(
  parent: Command,
  ctx: (cmd: Command) => Ctx,
  kind: Kind,
  verb: string,
  description: string,
): Command {
  return parent
    .command(`${verb} <identifier...>`)
    .description(description)
    .addOption(syncOption())
    .action((refs: string[], opts: { sync?: boolean }, cmd: Command) =>
      bulk(ctx(cmd), kind, refs, opts, (client, obj, base) =>
        client.request("POST", `${base}${obj.uuid}/${verb}/`),
      ),
    );
}

export function terminate(
  parent: Command,
  ctx: (cmd: Command) => Ctx,
  kind: Kind,
  verb: string,
  description: string,
): Command {
  return parent
    .command(`${verb} <identifier...>`)
    .description(description)
    .addOption(syncOption())
    .action((refs: string[], opts: { sync?: boolean }, cmd: Command) =>
      bulk(ctx(cmd), kind, refs, opts, (client, obj, base) =>
        client.request("DELETE", `${base}${obj.uuid}/`),
      ),
    );
}

/** `inspect <identifier...>`: the objects as JSON (one object, or a list for several). */
export function inspect(parent: Command, ctx: (cmd: Command) => Ctx, kind: Kind): Command {
  return parent
    .command("inspect <identifier...>")
    .description(`show ${kind.label}s as JSON`)
    .action(async (refs: string[], _opts: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const objects: Named[] = [];
      for (const ref of refs) objects.push(await resolve(c.client, kind, ref));
      c.out.json(objects.length === 1 ? objects[0] : objects);
    });
}

export function serviceUri(c: Ctx, ref: string): Promise<string> {
  return resolve(c.client, KINDS.service, ref).then((s) => s.resource_uri);
}

export { uuidOf };
