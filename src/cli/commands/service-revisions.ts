// `berth service revisions <service>` and `berth service rollback <service> [--revision N]`
// (issue 29): a service's kept definitions, newest first, and a redeploy back to one of them
// (by default the one before the current); `--sync` follows the rollback's action and exits
// non-zero when it fails, as for any operation.
import type { Command } from "commander";
import type { Revision } from "../../contract/revisions.ts";
import type { Service } from "../../contract/service.ts";
import { type Ctx, finish } from "../context.ts";
import { ago, lastSegment } from "../output.ts";
import { KINDS, resolve } from "../resolve.ts";
import { syncOption, wholeNumber } from "./common.ts";

/** What changed from one revision's definition to the next older one, in a few words. */
function summary(r: Revision, older: Revision | undefined): string {
  const d = r.definition;
  if (!older) return d.image_name;
  const o = older.definition;
  const changed = (Object.keys(d) as (keyof typeof d)[]).filter(
    (k) => JSON.stringify(d[k]) !== JSON.stringify(o[k]),
  );
  if (changed.length === 0) return "(same definition)";
  return changed.map((k) => (k === "image_name" ? `image ${d.image_name}` : k)).join(", ");
}

export function registerServiceRevisions(service: Command, ctx: (cmd: Command) => Ctx): void {
  const kind = KINDS.service;

  service
    .command("revisions <identifier>")
    .description("list a service's kept definitions, newest first (* marks the current one)")
    .action(async (ref: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const s = (await resolve(c.client, kind, ref)) as Service;
      const revisions = await c.client.all<Revision>(`${s.resource_uri}revisions/`);
      if (c.out.opts.json) return c.out.json({ meta: { total_count: revisions.length }, objects: revisions });
      if (c.out.opts.quiet) {
        for (const r of revisions) c.out.line(String(r.number));
        return;
      }
      c.out.table(
        [
          { header: "REVISION", value: (r) => `${r.number}${r.current ? " *" : ""}` },
          { header: "IMAGE", value: (r) => r.definition.image_name },
          { header: "CAUSE", value: (r) => r.cause },
          { header: "CREATED", value: (r) => ago(r.created_datetime) },
          { header: "ACTION", value: (r) => (r.action ? lastSegment(r.action).slice(0, 8) : "") },
          { header: "CHANGED", value: (r) => summary(r, revisions[revisions.indexOf(r) + 1]) },
        ],
        revisions,
      );
    });

  service
    .command("rollback <identifier>")
    .description("redeploy a service with a kept revision's definition (default: the one before the current)")
    .option("--revision <n>", "the revision to go back to (berth service revisions lists them)", wholeNumber)
    .option("--not-reuse-volumes", "give the new containers fresh volumes")
    .addOption(syncOption())
    .action(
      async (
        ref: string,
        o: { revision?: number; notReuseVolumes?: boolean; sync?: boolean },
        cmd: Command,
      ) => {
        const c = ctx(cmd);
        const s = (await resolve(c.client, kind, ref)) as Service;
        const reply = await c.client.request<Service>("POST", `${s.resource_uri}rollback/`, {
          body: o.revision === undefined ? {} : { revision: o.revision },
          query: o.notReuseVolumes ? { reuse_volumes: false } : {},
        });
        await finish(c, reply, { sync: o.sync, refetch: s.resource_uri });
      },
    );
}
