// `berth container …`: ps, inspect, start, stop, redeploy, logs, exec, terminate.
import type { Command } from "commander";
import type { Container } from "../../contract/container.ts";
import type { Query } from "../client.ts";
import { shellLine, takesCommandAfter } from "../command-words.ts";
import type { Ctx } from "../context.ts";
import { ago, type Column, lastSegment, short } from "../output.ts";
import { KINDS, resolve } from "../resolve.ts";
import { execIn, printLogs } from "../streams.ts";
import {
  bulk,
  failingOption,
  inspect,
  type ListOptions,
  operation,
  quietOption,
  syncOption,
  terminate,
  wholeNumber,
} from "./common.ts";

const ports = (c: Container) =>
  (c.container_ports ?? [])
    .map((p) =>
      p.published && p.outer_port
        ? `${p.outer_port}->${p.inner_port}/${p.protocol}`
        : `${p.inner_port}/${p.protocol}`,
    )
    .join(", ");

export const CONTAINER_COLUMNS: Column<Container>[] = [
  { header: "NAME", value: (c) => c.name },
  { header: "UUID", value: (c) => short(c.uuid) },
  { header: "STATUS", value: (c) => c.state, state: true },
  { header: "IMAGE", value: (c) => c.image_name },
  { header: "RUN COMMAND", value: (c) => c.run_command },
  { header: "EXIT CODE", value: (c) => c.exit_code },
  { header: "DEPLOYED", value: (c) => ago(c.deployed_datetime) },
  { header: "PORTS", value: ports },
  { header: "NODE", value: (c) => short(lastSegment(c.node)) },
];

export function registerContainer(program: Command, ctx: (cmd: Command) => Ctx): void {
  const container = program.command("container").description("containers: the running instances of services");
  const kind = KINDS.container;

  container
    .command("ps")
    .alias("ls")
    .description("list containers")
    .addOption(quietOption())
    .option("-s, --status <state>", "only containers in this state (e.g. Running)")
    .option("--service <service>", "only containers of this service")
    .option("--node <node>", "only containers on this node")
    .option("-a, --all", "include terminated containers")
    .addOption(failingOption("crashed, or running unhealthy"))
    .action(async (o: ListOptions & { service?: string; node?: string }, cmd: Command) => {
      const c = ctx(cmd);
      const query: Query = { state: o.status, failing: o.failing || undefined };
      if (o.service) query.service = (await resolve(c.client, KINDS.service, o.service)).resource_uri;
      if (o.node) query.node = (await resolve(c.client, KINDS.node, o.node)).resource_uri;
      const objects = (
        await c.client.all<Container>(c.client.collection(kind.prefix, kind.resource), query)
      ).filter((x) => o.all || o.status === "Terminated" || x.state !== "Terminated");
      c.out.list(objects, CONTAINER_COLUMNS);
    });

  inspect(container, ctx, kind);
  operation(container, ctx, kind, "start", "start stopped containers");
  operation(container, ctx, kind, "stop", "stop running containers");
  terminate(container, ctx, kind, "terminate", "terminate containers (their data is deleted)");
  container
    .command("redeploy <identifier...>")
    .description("redeploy containers with their service's current definition")
    .option("--not-reuse-volumes", "give the new containers fresh volumes")
    .addOption(syncOption())
    .action((refs: string[], o: { notReuseVolumes?: boolean; sync?: boolean }, cmd: Command) =>
      bulk(ctx(cmd), kind, refs, o, (client, x, b) =>
        client.request("POST", `${b}${x.uuid}/redeploy/`, {
          query: o.notReuseVolumes ? { reuse_volumes: false } : {},
        }),
      ),
    );

  container
    .command("logs <identifier...>")
    .description("logs of containers")
    .option("-f, --follow", "keep printing new lines")
    .option("--tail <n>", "lines from the end to print first (default 300)", wholeNumber)
    .action(async (refs: string[], o: { follow?: boolean; tail?: number }, cmd: Command) => {
      const c = ctx(cmd);
      const found = [];
      for (const ref of refs) found.push(await resolve(c.client, kind, ref));
      await Promise.all(
        found.map((x) =>
          printLogs(c.client, c.out, `${x.resource_uri}logs/`, {
            follow: o.follow === true,
            tail: o.tail,
          }),
        ),
      );
    });

  const exec = container
    .command("exec <identifier> [command...]")
    .description(
      "run a command in a container (default: a shell); interactive on a terminal. The words after the " +
        "container's name are the command and its arguments, options included (exec's own options go before " +
        "the name); a single word is run as a shell command line",
    )
    .option("-t, --tty", "run on a terminal even when stdin or stdout is not one")
    .option("-T, --no-tty", "never use a terminal (plain pipes)");
  takesCommandAfter(exec, 1).action(
    async (ref: string, words: string[], o: { tty?: boolean }, cmd: Command) => {
      const c = ctx(cmd);
      const x = await resolve(c.client, kind, ref);
      const explicit = cmd.getOptionValueSource("tty") === "cli";
      const tty = explicit ? o.tty === true : process.stdin.isTTY === true && process.stdout.isTTY === true;
      const code = await execIn(c.client, x.resource_uri, {
        // One word is a command line for sh (`exec web-1 'ls | wc -l'`); several are the program and
        // its arguments as given (`exec web-1 sh -c 'echo $((1+1))'`), quoted so sh keeps them whole.
        command: words.length === 0 ? "sh" : words.length === 1 ? words[0]! : shellLine(words),
        tty,
        stdin: process.stdin,
        stdout: process.stdout,
        stderr: process.stderr,
      });
      process.exitCode = code;
    },
  );
}
