// `berth node unknown ls|rm`: engine containers on a node that carry Berth's labels for records
// Berth does not hold (made after a restored backup). Berth never removes them by itself; `rm`
// removes one through Berth (checked again first, an action in the audit log).
import type { Command } from "commander";
import type { Ctx } from "../context.ts";
import { KINDS, resolve } from "../resolve.ts";

interface Unknown {
  id: string;
  name: string;
  state: string;
  container: string;
  service: string | null;
  created_datetime: string;
}

export function registerUnknownContainers(node: Command, ctx: (cmd: Command) => Ctx): void {
  const unknown = node
    .command("unknown")
    .description(
      "engine containers on a node with Berth's labels for records Berth does not hold (after a restore)",
    );
  const base = async (c: Ctx, ref: string) =>
    `${(await resolve(c.client, KINDS.node, ref)).resource_uri}unknowncontainer/`;
  unknown
    .command("ls <node>")
    .description("list them")
    .action(async (ref: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const listed = await c.client.get<{ objects: Unknown[] }>(await base(c, ref));
      if (c.out.opts.json) return c.out.json(listed);
      c.out.table(
        [
          { header: "ENGINE ID", value: (u: Unknown) => u.id.slice(0, 12) },
          { header: "NAME", value: (u) => u.name },
          { header: "STATE", value: (u) => u.state },
          { header: "RECORD", value: (u) => u.container },
          { header: "CREATED", value: (u) => u.created_datetime },
        ],
        listed.objects,
      );
    });
  unknown
    .command("rm <node> <engine-id>")
    .description(
      "remove one (its engine id, or 12+ of its first characters); a container Berth holds is refused",
    )
    .action(async (ref: string, id: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const removed = (await c.client.request<Unknown>("DELETE", `${await base(c, ref)}${id}/`)).body;
      if (c.out.opts.json) return c.out.json(removed);
      c.out.line(`removed engine container ${removed.id.slice(0, 12)} (${removed.name})`);
    });
}
