// `berth service …`: ls/ps, create, run, inspect, start, stop, redeploy, scale, set, env, logs,
// terminate — with the historical CLI's options; domain and revisions/rollback in files of their own.

import fs from "node:fs";
import { type Command, InvalidArgumentError, Option } from "commander";
import type {
  EnvVarBody,
  Service,
  ServiceBindingBody,
  ServiceCreateBody,
  ServiceField,
  ServiceLinkBody,
  ServicePortBody,
} from "../../contract/service.ts";
import type { Stack } from "../../contract/stack.ts";
import { durationSeconds } from "../../domain/stop.ts";
import type { Query } from "../client.ts";
import { type Ctx, finish } from "../context.ts";
import { CliError, usageError } from "../errors.ts";
import { type HealthOptions, healthBody, healthOptions } from "../health.ts";
import { ago, type Column, lastSegment, short } from "../output.ts";
import { KINDS, resolve } from "../resolve.ts";
import { printLogs } from "../streams.ts";
import {
  bulk,
  choice,
  collect,
  failingOption,
  inspect,
  type ListOptions,
  operation,
  quietOption,
  serviceUri,
  syncOption,
  terminate,
  wholeNumber,
} from "./common.ts";
import { registerServiceDomain } from "./service-domain.ts";
import { registerServiceRevisions } from "./service-revisions.ts";

const STRATEGIES = ["EMPTIEST_NODE", "HIGH_AVAILABILITY", "EVERY_NODE"];
const AUTORESTART = ["OFF", "ON_FAILURE", "ALWAYS"];
const AUTODESTROY = ["OFF", "ON_SUCCESS", "ALWAYS"];

/** A service as the list shows it: with its stack's name. */
type ListedService = Service & { stack_name?: string };

export const SERVICE_COLUMNS: Column<ListedService>[] = [
  { header: "NAME", value: (s) => s.name },
  { header: "UUID", value: (s) => short(s.uuid) },
  { header: "STATUS", value: (s) => s.state, state: true },
  { header: "#CONTAINERS", value: (s) => s.current_num_containers },
  { header: "IMAGE", value: (s) => s.image_name },
  { header: "DEPLOYED", value: (s) => ago(s.deployed_datetime) },
  { header: "PUBLIC DNS", value: (s) => s.public_dns },
  { header: "STACK", value: (s) => s.stack_name ?? "" },
];

type NotOffered = { notOffered: string };
const STACK_FILE: NotOffered = {
  notOffered: "an engine option few services need: set it in a stack file (`berth stack`) or with the API",
};
const PRIVILEGE: NotOffered = {
  notOffered:
    "reaches the node, allowed per namespace by an administrator: set it in a stack file (`berth stack`) or with the API",
};
const ALIAS: NotOffered = { notOffered: "another spelling of a field offered under its own name" };

/**
 * Each field of Create service (contract/service.ts): the option of `service create`/`run`/`set`
 * that sets it, or why none does. The compiler refuses a field of the contract missing here;
 * test/domain/service-definition.test.ts checks each option exists.
 */
export const CLI_FIELDS: Record<ServiceField, string | NotOffered> = {
  image: "--image", // `service set`; create and run take it as their argument
  name: "--name",
  nickname: "--nickname",
  target_num_containers: "--target-num-containers",
  run_command: "--run-command",
  entrypoint: "--entrypoint",
  container_ports: "--publish",
  container_envvars: "--env",
  linked_to_service: "--link-service",
  bindings: "--volume",
  autorestart: "--autorestart",
  autodestroy: "--autodestroy",
  sequential_deployment: "--sequential",
  roles: "--role",
  privileged: "--privileged",
  deployment_strategy: "--deployment-strategy",
  tags: "--tag",
  autoredeploy: "--autoredeploy",
  net: "--net",
  pid: "--pid",
  working_dir: "--workdir",
  cpu_shares: "--cpushares",
  memory: "--memory",
  stop_signal: "--stop-signal",
  stop_grace_period: "--stop-grace-period",
  health_check: "--health",
  rollout: STACK_FILE,
  memory_swap: STACK_FILE,
  cpuset: STACK_FILE,
  dns: STACK_FILE,
  dns_search: STACK_FILE,
  extra_hosts: STACK_FILE,
  labels: STACK_FILE,
  user: STACK_FILE,
  hostname: STACK_FILE,
  domainname: STACK_FILE,
  mac_address: STACK_FILE,
  tty: STACK_FILE,
  stdin_open: STACK_FILE,
  read_only: STACK_FILE,
  cap_add: PRIVILEGE,
  cap_drop: STACK_FILE,
  devices: PRIVILEGE,
  security_opt: PRIVILEGE,
  cgroup_parent: PRIVILEGE,
  secuirty_opt: ALIAS,
  cgroup_name: ALIAS,
  domains: {
    notOffered: "a list of its own: `berth service domain add|ls|rm`, or a stack file's `domains:`",
  },
};

interface DefinitionOptions extends HealthOptions {
  name?: string;
  nickname?: string;
  cpushares?: number;
  memory?: number;
  privileged?: boolean;
  targetNumContainers?: number;
  runCommand?: string;
  entrypoint?: string;
  publish?: string[];
  expose?: string[];
  env?: string[];
  envFile?: string[];
  tag?: string[];
  linkService?: string[];
  autodestroy?: ServiceCreateBody["autodestroy"];
  autoredeploy?: boolean;
  autorestart?: ServiceCreateBody["autorestart"];
  role?: string[];
  sequential?: boolean;
  volume?: string[];
  volumesFrom?: string[];
  deploymentStrategy?: ServiceCreateBody["deployment_strategy"];
  net?: ServiceCreateBody["net"];
  pid?: ServiceCreateBody["pid"];
  workdir?: string;
  image?: string;
  sync?: boolean;
  redeploy?: boolean;
  stopSignal?: string;
  stopGracePeriod?: number;
}

/** The definition options shared by create, run and set. */
function definitionOptions(cmd: Command, forSet: boolean): Command {
  if (!forSet) cmd.option("-n, --name <name>", "service name (default: the image name)");
  else cmd.option("--image <image>", "image name and tag");
  return healthOptions(cmd)
    .option("--nickname <nickname>", "friendly name")
    .option("--cpushares <n>", "relative CPU share", wholeNumber)
    .option("--memory <mb>", "memory limit in MB", wholeNumber)
    .option("--privileged", "give the containers extended privileges")
    .option("-t, --target-num-containers <n>", "number of containers", wholeNumber)
    .option("-r, --run-command <command>", "command the containers run")
    .option("--entrypoint <entrypoint>", "entrypoint of the containers")
    .option("-p, --publish <port>", "publish a port: [outer:]inner[/tcp|udp] (repeatable)", collect)
    .option("--expose <port>", "expose a port to linked services: inner[/tcp|udp] (repeatable)", collect)
    .option("-e, --env <KEY=VALUE>", "environment variable (repeatable)", collect)
    .option("--env-file <file>", "file of KEY=VALUE lines (repeatable)", collect)
    .option("--tag <tag>", "deploy only to nodes with this tag (repeatable)", collect)
    .option("--link-service <service:alias>", "link to another service (repeatable)", collect)
    .addOption(
      new Option("--autodestroy <mode>", AUTODESTROY.join(" | ")).argParser(
        choice("--autodestroy", AUTODESTROY),
      ),
    )
    .option("--autoredeploy", "redeploy when the image is pushed to Berth's registry")
    .addOption(
      new Option("--autorestart <mode>", AUTORESTART.join(" | ")).argParser(
        choice("--autorestart", AUTORESTART),
      ),
    )
    .option("--role <role>", "API role of the containers: global (repeatable)", collect)
    .option("--sequential", "deploy and scale containers one after another")
    .option("-v, --volume <volume>", "[host_path:]container_path[:ro|:rw] (repeatable)", collect)
    .option("--volumes-from <service>", "mount the volumes of a service (repeatable)", collect)
    .addOption(
      new Option("--deployment-strategy <strategy>", STRATEGIES.join(" | ")).argParser(
        choice("--deployment-strategy", STRATEGIES),
      ),
    )
    .addOption(new Option("--net <mode>", "network mode").choices(["bridge", "host"]))
    .addOption(new Option("--pid <mode>", "PID namespace").choices(["none", "host"]))
    .option("--workdir <dir>", "working folder of the command")
    .option(
      "--stop-signal <signal>",
      "signal that asks the command to stop (default: the image's, or SIGTERM)",
    )
    .option(
      "--stop-grace-period <duration>",
      "how long a stop waits for the command before the engine kills it: seconds or 30s, 1m30s (default 10 s)",
      gracePeriod,
    );
}

/** `--stop-grace-period`: seconds, or a compose duration (domain/stop.ts). */
function gracePeriod(value: string): number {
  const seconds = /^\d+$/.test(value.trim()) ? Number(value.trim()) : durationSeconds(value);
  if (typeof seconds === "string") throw new InvalidArgumentError(seconds);
  return seconds;
}

/** `[outer:]inner[/proto]` → a service port. */
export function parsePort(value: string, published: boolean): ServicePortBody {
  const m = /^(?:(\d+):)?(\d+)(?:\/(tcp|udp))?$/i.exec(value.trim());
  if (!m)
    throw usageError(`${published ? "--publish" : "--expose"} ${value}: expected [outer:]inner[/tcp|udp]`);
  if (m[1] && !published) throw usageError(`--expose ${value}: an exposed port has no outer port`);
  return {
    protocol: (m[3] ?? "tcp").toLowerCase() === "udp" ? "udp" : "tcp",
    inner_port: Number(m[2]),
    ...(m[1] ? { outer_port: Number(m[1]) } : {}),
    published,
  };
}

export function parseEnv(entries: readonly string[], where = "-e"): EnvVarBody[] {
  return entries.map((e) => {
    const eq = e.indexOf("=");
    if (eq <= 0) throw usageError(`${where} ${e}: expected KEY=VALUE`);
    return { key: e.slice(0, eq), value: e.slice(eq + 1) };
  });
}

function envFileEntries(file: string): string[] {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
  }
  return text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
}

function parseVolume(value: string): ServiceBindingBody {
  const parts = value.split(":");
  let mode: string | undefined;
  if (parts.length > 1 && (parts.at(-1) === "ro" || parts.at(-1) === "rw")) mode = parts.pop();
  if (parts.length > 2 || parts.some((p) => p === ""))
    throw usageError(`-v ${value}: expected [host_path:]container_path[:ro|:rw]`);
  const [a, b] = parts as [string, string | undefined];
  return {
    ...(b === undefined ? { container_path: a } : { host_path: a, container_path: b }),
    rewritable: mode !== "ro",
  };
}

/** Options → the fields of a create or update body (only those given). */
async function definitionBody(c: Ctx, o: DefinitionOptions): Promise<Partial<ServiceCreateBody>> {
  const body: Partial<ServiceCreateBody> = {};
  if (o.name !== undefined) body.name = o.name;
  if (o.image !== undefined) body.image = o.image;
  if (o.nickname !== undefined) body.nickname = o.nickname;
  if (o.cpushares !== undefined) body.cpu_shares = o.cpushares;
  if (o.memory !== undefined) body.memory = o.memory;
  if (o.privileged) body.privileged = true;
  if (o.targetNumContainers !== undefined) body.target_num_containers = o.targetNumContainers;
  if (o.runCommand !== undefined) body.run_command = o.runCommand;
  if (o.entrypoint !== undefined) body.entrypoint = o.entrypoint;
  if (o.publish || o.expose)
    body.container_ports = [
      ...(o.publish ?? []).map((p) => parsePort(p, true)),
      ...(o.expose ?? []).map((p) => parsePort(p, false)),
    ];
  if (o.env || o.envFile) {
    const fromFiles = (o.envFile ?? []).flatMap((f) => parseEnv(envFileEntries(f), f));
    body.container_envvars = [...fromFiles, ...parseEnv(o.env ?? [])];
  }
  if (o.tag) body.tags = o.tag.map((name) => ({ name }));
  if (o.linkService) {
    const links: ServiceLinkBody[] = [];
    body.linked_to_service = links;
    for (const link of o.linkService) {
      const [target, alias] = link.split(":");
      if (!target) throw usageError(`--link-service ${link}: expected service[:alias]`);
      links.push({ to_service: await serviceUri(c, target), name: alias || target });
    }
  }
  if (o.autodestroy !== undefined) body.autodestroy = o.autodestroy;
  if (o.autoredeploy) body.autoredeploy = true;
  if (o.autorestart !== undefined) body.autorestart = o.autorestart;
  // The server judges the role names (a wrong one is its 400 naming `roles`).
  if (o.role) body.roles = o.role as ServiceCreateBody["roles"];
  if (o.sequential) body.sequential_deployment = true;
  if (o.volume || o.volumesFrom) {
    const bindings = (o.volume ?? []).map(parseVolume);
    body.bindings = bindings;
    for (const from of o.volumesFrom ?? []) bindings.push({ volumes_from: await serviceUri(c, from) });
  }
  if (o.deploymentStrategy !== undefined) body.deployment_strategy = o.deploymentStrategy;
  if (o.net !== undefined) body.net = o.net;
  if (o.pid !== undefined) body.pid = o.pid;
  if (o.workdir !== undefined) body.working_dir = o.workdir;
  if (o.stopSignal !== undefined) body.stop_signal = o.stopSignal;
  if (o.stopGracePeriod !== undefined) body.stop_grace_period = o.stopGracePeriod;
  const health = healthBody(o);
  if (health !== undefined) body.health_check = health as ServiceCreateBody["health_check"];
  return body;
}

export function registerService(program: Command, ctx: (cmd: Command) => Ctx): void {
  const service = program.command("service").description("services: templates of containers");
  const kind = KINDS.service;
  const base = (c: Ctx) => c.client.collection(kind.prefix, kind.resource);

  service
    .command("ls")
    .alias("ps")
    .description("list services")
    .addOption(quietOption())
    .option("-s, --status <state>", "only services in this state (e.g. Running)")
    .option("--stack <stack>", "only services of this stack")
    .option("-a, --all", "include terminated services")
    .addOption(failingOption("a container crashed or unhealthy, or partly running"))
    .action(async (o: ListOptions & { stack?: string }, cmd: Command) => {
      const c = ctx(cmd);
      const query: Query = { state: o.status, failing: o.failing || undefined };
      if (o.stack) query.stack = (await resolve(c.client, KINDS.stack, o.stack)).resource_uri;
      const objects = (await c.client.all<ListedService>(base(c), query)).filter(
        (s) => o.all || o.status === "Terminated" || s.state !== "Terminated",
      );
      const stacks = new Map<string, string>();
      for (const s of objects) {
        if (s.stack && !stacks.has(s.stack)) {
          const found = await c.client.get<Stack>(s.stack).catch(() => undefined);
          stacks.set(s.stack, found?.name ?? lastSegment(s.stack).slice(0, 8));
        }
        s.stack_name = s.stack ? stacks.get(s.stack) : "";
      }
      if (c.out.opts.json) {
        for (const s of objects) delete s.stack_name;
        return c.out.json({ meta: { total_count: objects.length }, objects });
      }
      c.out.list(objects, SERVICE_COLUMNS);
    });

  const create = async (image: string, o: DefinitionOptions, cmd: Command, start: boolean) => {
    const c = ctx(cmd);
    const body = { image, ...(await definitionBody(c, o)) };
    const created = await c.client.request<Service>("POST", base(c), { body });
    if (!start) return c.out.done(created.body);
    const started = await c.client.request("POST", `${base(c)}${created.body.uuid}/start/`);
    await finish(c, started, { sync: o.sync, refetch: `${base(c)}${created.body.uuid}/` });
  };
  definitionOptions(
    service.command("create <image>").description("create a service (not started)"),
    false,
  ).action((image: string, o: DefinitionOptions, cmd: Command) => create(image, o, cmd, false));
  definitionOptions(service.command("run <image>").description("create and start a service"), false)
    .addOption(syncOption())
    .action((image: string, o: DefinitionOptions, cmd: Command) => create(image, o, cmd, true));

  inspect(service, ctx, kind);
  operation(service, ctx, kind, "start", "start services (deploys their containers if needed)");
  operation(service, ctx, kind, "stop", "stop services");
  terminate(service, ctx, kind, "terminate", "terminate services and their containers (not reversible)");

  service
    .command("redeploy <identifier...>")
    .description("redeploy services' containers with their current definition")
    .option("--not-reuse-volumes", "give the new containers fresh volumes")
    .addOption(syncOption())
    .action((refs: string[], o: { notReuseVolumes?: boolean; sync?: boolean }, cmd: Command) =>
      bulk(ctx(cmd), kind, refs, o, (client, s, b) =>
        client.request("POST", `${b}${s.uuid}/redeploy/`, {
          query: o.notReuseVolumes ? { reuse_volumes: false } : {},
        }),
      ),
    );

  service
    .command("scale <identifier> <target>")
    .description("scale a service to a number of containers")
    .addOption(syncOption())
    .action(async (ref: string, target: string, o: { sync?: boolean }, cmd: Command) => {
      if (!/^\d+$/.test(target)) throw usageError(`scale: target must be a whole number, got ${target}`);
      const c = ctx(cmd);
      const s = await resolve(c.client, kind, ref);
      const uri = `${base(c)}${s.uuid}/`;
      await c.client.request("PATCH", uri, { body: { target_num_containers: Number(target) } });
      await finish(c, await c.client.request("POST", `${uri}scale/`), { sync: o.sync, refetch: uri });
    });

  definitionOptions(service.command("set <identifier...>").description("change services' definitions"), true)
    .option("--redeploy", "redeploy the services afterwards, so the change applies")
    .addOption(syncOption())
    .action(async (refs: string[], o: DefinitionOptions, cmd: Command) => {
      const c = ctx(cmd);
      const body = await definitionBody(c, o);
      if (Object.keys(body).length === 0) throw usageError("service set: give at least one option to change");
      await bulk(c, kind, refs, o, async (client, s, b) => {
        const patched = await client.request("PATCH", `${b}${s.uuid}/`, { body });
        return o.redeploy ? client.request("POST", `${b}${s.uuid}/redeploy/`) : patched;
      });
    });

  registerServiceDomain(service, ctx);
  registerServiceRevisions(service, ctx);
  const env = service.command("env").description("environment variables of services");
  env
    .command("ls <identifier>")
    .description("list a service's environment variables")
    .addOption(quietOption())
    .action(async (ref: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const s = await resolve(c.client, kind, ref);
      const vars = s.container_envvars;
      if (c.out.opts.json) return c.out.json(vars);
      if (c.out.opts.quiet) {
        for (const v of vars) c.out.line(v.key);
        return;
      }
      c.out.table(
        [
          { header: "KEY", value: (v) => v.key },
          { header: "VALUE", value: (v) => v.value },
        ],
        vars,
      );
    });
  const envChange = (
    verb: string,
    args: string,
    description: string,
    change: (current: EnvVarBody[], values: string[]) => EnvVarBody[],
  ) =>
    env
      .command(`${verb} <identifier> ${args}`)
      .description(description)
      .option("--redeploy", "redeploy the service afterwards, so the change applies")
      .addOption(syncOption())
      .action(
        async (ref: string, values: string[], o: { redeploy?: boolean; sync?: boolean }, cmd: Command) => {
          const c = ctx(cmd);
          await bulk(c, kind, [ref], o, async (client, s, b) => {
            const next = change(
              s.container_envvars.map((v) => ({ key: v.key, value: v.value })),
              values,
            );
            const patched = await client.request("PATCH", `${b}${s.uuid}/`, {
              body: { container_envvars: next },
            });
            return o.redeploy ? client.request("POST", `${b}${s.uuid}/redeploy/`) : patched;
          });
        },
      );
  envChange("add", "<KEY=VALUE...>", "add or change variables", (current, values) => {
    const added = parseEnv(values, "add");
    return [...current.filter((v) => !added.some((a) => a.key === v.key)), ...added];
  });
  envChange("set", "<KEY=VALUE...>", "replace all variables with these", (_current, values) =>
    parseEnv(values, "set"),
  );
  envChange("rm", "<KEY...>", "remove variables", (current, keys) => {
    const missing = keys.filter((k) => !current.some((v) => v.key === k));
    if (missing.length) throw new CliError(`no variable ${missing.join(", ")} in this service`);
    return current.filter((v) => !keys.includes(v.key));
  });

  service
    .command("logs <identifier...>")
    .description("logs of every container of services")
    .option("-f, --follow", "keep printing new lines")
    .option("--tail <n>", "lines from the end to print first (default 300)", wholeNumber)
    .action(async (refs: string[], o: { follow?: boolean; tail?: number }, cmd: Command) => {
      const c = ctx(cmd);
      const services = [];
      for (const ref of refs) services.push(await resolve(c.client, kind, ref));
      await Promise.all(
        services.map((s) =>
          printLogs(c.client, c.out, `${s.resource_uri}logs/`, {
            follow: o.follow === true,
            tail: o.tail,
            prefixSource: true,
          }),
        ),
      );
    });
}
