// `berth-agent` (bin/berth-agent.mjs), also `berth agent` (the berth package's agent.mjs): run on a
// server with Docker to make it a Berth node.
//   berth-agent --url http://berth.example:8000 --token <token> [--install-systemd]
// Later starts need no token: the identity file in the state directory re-attaches the same node.
import path from "node:path";
import { parseArgs } from "node:util";
import { AgentError, BerthAgent } from "./agent.ts";
import { loadIdentity } from "./identity.ts";
import { AGENT_OPTIONS, agentUsage } from "./options.ts";
import { EXIT_REFUSED, installUnit } from "./systemd.ts";

export interface MainOptions {
  /** The name it runs under, for messages and usage (`berth-agent`, or `berth agent`). */
  program?: string;
  /** The script the systemd unit runs, and the arguments before the agent's own (`agent`). */
  script?: string;
  scriptArgs?: string[];
}

export async function main(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  o: MainOptions = {},
): Promise<number> {
  const program = o.program ?? "berth-agent";
  const USAGE = agentUsage(program);
  const log = (line: string) => process.stderr.write(`${program}: ${line}\n`);
  let values: ReturnType<typeof parse>["values"];
  try {
    values = parse(argv).values;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const stateDir = path.resolve(values["state-dir"] ?? "/var/lib/berth-agent");
  const known = await loadIdentity(stateDir).catch(() => undefined);
  const url = values.url ?? known?.url;
  if (!url || !/^https?:\/\/[^/]+/.test(url)) {
    process.stderr.write(`--url must be Berth's http(s) address\n${USAGE}`);
    return 2;
  }
  const dockerHost = env.DOCKER_HOST?.startsWith("unix://")
    ? env.DOCKER_HOST.slice("unix://".length)
    : undefined;
  const socketPath = path.resolve(values["docker-socket"] ?? dockerHost ?? "/var/run/docker.sock");
  const agent = new BerthAgent({
    url,
    token: values.token ?? env.BERTH_AGENT_TOKEN,
    stateDir,
    socketPath,
    nickname: values.nickname,
    tags: values.tag,
    noRouter: values["no-router"],
    log,
  });
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => agent.stop());
  try {
    if (values["install-systemd"]) {
      await agent.ensureIdentity();
      const script = path.resolve(o.script ?? process.argv[1] ?? "berth-agent");
      const { started } = await installUnit({
        unitDir: values["systemd-dir"] ?? "/etc/systemd/system",
        node: process.execPath,
        script,
        args: [
          ...(o.scriptArgs ?? []),
          "--url",
          url,
          "--state-dir",
          stateDir,
          "--docker-socket",
          socketPath,
          ...(values["no-router"] ? ["--no-router"] : []),
        ],
        log,
      });
      if (started) return 0;
    }
    const exit = await agent.run();
    if (exit.reason === "terminated") {
      log(`node terminated in Berth; removed ${exit.removed} container(s); exiting`);
      return 0;
    }
    if (exit.reason === "refused") {
      log(`Berth refused this node: ${exit.message}`);
      return EXIT_REFUSED;
    }
    return 0;
  } catch (err) {
    log(err instanceof AgentError ? err.message : `failed: ${(err as Error).stack ?? String(err)}`);
    return 1;
  }
}

function parse(argv: string[]) {
  // parseArgs reads type, multiple and short; the usage fields ride along unread.
  return parseArgs({ args: argv, options: AGENT_OPTIONS, strict: true });
}
