// The `berth` command line. Talks to a Berth server over HTTP only (BERTH_URL, BERTH_USER,
// BERTH_APIKEY; DOCKERCLOUD_USER / DOCKERCLOUD_APIKEY accepted too).
import fs from "node:fs";
import path from "node:path";
import { CliError, Client, configFromEnv, type Json } from "./client.ts";
import { lastSegment, short, str, table } from "./table.ts";

const USAGE = `usage: berth [--namespace NS] [--json] <command>

  service ls
  service create <image> [--name N] [--target N] [--run-command C]
  service start|stop|terminate <name-or-uuid>
  container ls
  nodecluster ls
  node ls
  stack ls
  stack up -f <file.json> [--name N]
  action ls

environment: BERTH_URL (default http://127.0.0.1:8000), BERTH_USER, BERTH_APIKEY
`;

const APP = "/api/app/v1/";
const INFRA = "/api/infra/v1/";
const VALUE_OPTIONS = new Set(["--name", "--target", "--run-command", "--namespace", "-f", "--file"]);

interface Args {
  positional: string[];
  options: Map<string, string>;
  json: boolean;
  help: boolean;
}

export function parseArgs(argv: readonly string[]): Args {
  const positional: string[] = [];
  const options = new Map<string, string>();
  let json = false;
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i]!;
    let inline: string | undefined;
    const eq = arg.indexOf("=");
    if (arg.startsWith("--") && eq > 0) {
      inline = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    if (arg === "--json") json = true;
    else if (arg === "-h" || arg === "--help") help = true;
    else if (VALUE_OPTIONS.has(arg)) {
      const value = inline ?? argv[++i];
      if (value === undefined) throw new CliError(`${arg} needs a value\n\n${USAGE}`, 2);
      options.set(arg === "--file" ? "-f" : arg, value);
    } else if (arg.startsWith("-") && arg !== "-") throw new CliError(`unknown option ${arg}\n\n${USAGE}`, 2);
    else positional.push(arg);
  }
  return { positional, options, json, help };
}

function usageError(message?: string): CliError {
  return new CliError(message ? `${message}\n\n${USAGE}` : USAGE.trimEnd(), 2);
}

function print(json: boolean, data: Json, render: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(data, null, 2)}\n` : render());
}

async function listCommand(
  client: Client,
  args: Args,
  path: string,
  query: Record<string, string>,
  headers: string[],
  row: (o: Json) => string[],
): Promise<void> {
  const page = await client.list(path, query);
  print(args.json, page, () => table(headers, ((page?.objects ?? []) as Json[]).map(row)));
}

/** A stack file: `{name, services: [...]}` or `{<service name>: {<keys>}}` (what export returns). */
export function stackBody(doc: Json, fileName: string, name: string | undefined): Json {
  if (!doc || typeof doc !== "object" || Array.isArray(doc))
    throw new CliError(`${fileName}: a stack file must be a JSON object`);
  const fallback = path.basename(fileName).replace(/\.[^.]*$/, "");
  if (Array.isArray(doc.services))
    return { ...doc, name: name ?? doc.name ?? fallback, services: doc.services };
  const services = Object.entries(doc).map(([key, value]) => {
    if (!value || typeof value !== "object" || Array.isArray(value))
      throw new CliError(`${fileName}: ${key} must be a service (an object of stack-file keys)`);
    return { name: key, ...(value as Record<string, unknown>) };
  });
  return { name: name ?? fallback, services };
}

export async function run(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<void> {
  const args = parseArgs(argv);
  const client = new Client(configFromEnv(env, args.options.get("--namespace")));
  const [group, verb, ...rest] = args.positional;
  const opt = (k: string) => args.options.get(k);
  const one = (what: string): string => {
    if (rest.length !== 1) throw usageError(`berth ${group} ${verb} needs one ${what}`);
    return rest[0]!;
  };

  switch (`${group ?? ""} ${verb ?? ""}`) {
    case "service ls":
      return listCommand(
        client,
        args,
        client.ns(APP, "service"),
        {},
        ["NAME", "UUID", "STATUS", "#CONTAINERS", "IMAGE"],
        (s) => [str(s.name), short(s.uuid), str(s.state), str(s.current_num_containers), str(s.image_name)],
      );
    case "service create": {
      const image = one("image");
      const body: Record<string, unknown> = { image };
      if (opt("--name") !== undefined) body.name = opt("--name");
      if (opt("--target") !== undefined) {
        const n = Number(opt("--target"));
        if (!Number.isInteger(n) || n < 0) throw usageError("--target must be a whole number");
        body.target_num_containers = n;
      }
      if (opt("--run-command") !== undefined) body.run_command = opt("--run-command");
      const s = await client.request("POST", client.ns(APP, "service"), body);
      return print(args.json, s, () => `${s.uuid}\n`);
    }
    case "service start":
    case "service stop":
    case "service terminate": {
      const base = client.ns(APP, "service");
      const s = await client.resolve(base, "service", one("service name or uuid"));
      const res =
        verb === "terminate"
          ? await client.request("DELETE", `${base}${s.uuid}/`)
          : await client.request("POST", `${base}${s.uuid}/${verb}/`);
      return print(args.json, res ?? s, () => `${s.uuid}\n`);
    }
    case "container ls":
      return listCommand(
        client,
        args,
        client.ns(APP, "container"),
        {},
        ["NAME", "UUID", "STATUS", "IMAGE", "EXIT CODE", "NODE"],
        (c) => [
          str(c.name),
          short(c.uuid),
          str(c.state),
          str(c.image_name),
          str(c.exit_code),
          short(lastSegment(c.node)),
        ],
      );
    case "nodecluster ls":
      return listCommand(
        client,
        args,
        client.ns(INFRA, "nodecluster"),
        {},
        ["NAME", "UUID", "REGION", "TYPE", "DEPLOYED", "STATUS", "CURRENT#NODES", "TARGET#NODES"],
        (n) => [
          str(n.name),
          short(n.uuid),
          lastSegment(n.region),
          lastSegment(n.node_type),
          str(n.deployed_datetime),
          str(n.state),
          str(n.current_num_nodes),
          str(n.target_num_nodes),
        ],
      );
    case "node ls":
      return listCommand(
        client,
        args,
        client.ns(INFRA, "node"),
        {},
        ["UUID", "FQDN", "LASTSEEN", "STATUS", "CLUSTER", "DOCKER_VER"],
        (n) => [
          short(n.uuid),
          str(n.external_fqdn),
          str(n.last_seen),
          str(n.state),
          short(lastSegment(n.node_cluster)),
          str(n.engine_version),
        ],
      );
    case "stack ls":
      return listCommand(
        client,
        args,
        client.ns(APP, "stack"),
        {},
        ["NAME", "UUID", "STATUS", "#SERVICES", "DEPLOYED"],
        (s) => [
          str(s.name),
          short(s.uuid),
          str(s.state),
          str((s.services ?? []).length),
          str(s.deployed_datetime),
        ],
      );
    case "stack up": {
      if (rest.length > 0) throw usageError("berth stack up takes no arguments besides its options");
      const file = opt("-f");
      if (file === undefined) throw usageError("berth stack up needs -f <file.json>");
      let doc: Json;
      try {
        doc = JSON.parse(fs.readFileSync(file, "utf8"));
      } catch (err) {
        throw new CliError(`${file}: ${(err as Error).message}`);
      }
      const base = client.ns(APP, "stack");
      const stack = await client.request("POST", base, stackBody(doc, file, opt("--name")));
      await client.request("POST", `${base}${stack.uuid}/start/`);
      return print(args.json, stack, () => `${stack.uuid}\n`);
    }
    case "action ls":
      return listCommand(
        client,
        args,
        "/api/audit/v1/action/",
        { order_by: "-start_date" },
        ["ACTION", "OBJECT", "STATE", "START"],
        (a) => [str(a.action), str(a.object), str(a.state), str(a.start_date)],
      );
    default:
      if (group === "help" || args.help) {
        process.stdout.write(USAGE);
        return;
      }
      if (group === undefined) throw usageError();
      throw usageError(`unknown command: ${args.positional.join(" ")}`);
  }
}

try {
  await run(process.argv.slice(2), process.env);
} catch (err) {
  if (err instanceof CliError) {
    process.stderr.write(`${err.message}\n`);
    process.exitCode = err.exitCode;
  } else {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  }
}
