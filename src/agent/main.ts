// `berth-agent` (bin/berth-agent.mjs): run on a server with Docker to make it a Berth node.
//   berth-agent --url http://berth.example:8000 --token <token> [--install-systemd]
// Later starts need no token: the identity file in the state directory re-attaches the same node.
import path from "node:path";
import { parseArgs } from "node:util";
import { AgentError, BerthAgent } from "./agent.ts";
import { loadIdentity } from "./identity.ts";
import { EXIT_REFUSED, installUnit } from "./systemd.ts";

const USAGE = `usage: berth-agent --url <Berth URL> [--token <token>] [options]

  --url <url>              Berth's address, as this server reaches it (http://host:8000)
  --token <token>          registration token from POST /api/infra/v1/token/ (first start only)
  --state-dir <dir>        where the node identity is kept (default /var/lib/berth-agent)
  --docker-socket <path>   the local engine's socket (default from DOCKER_HOST, else /var/run/docker.sock)
  --nickname <name>        the node's nickname in Berth
  --tag <name>             a node tag (repeatable)
  --install-systemd        write ${"berth-agent.service"} and enable it (the service runs without the token)
  --systemd-dir <dir>      where the unit goes (default /etc/systemd/system)
`;

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const log = (line: string) => process.stderr.write(`berth-agent: ${line}\n`);
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
    log,
  });
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => agent.stop());
  try {
    if (values["install-systemd"]) {
      await agent.ensureIdentity();
      const script = path.resolve(process.argv[1] ?? "berth-agent");
      const { started } = await installUnit({
        unitDir: values["systemd-dir"] ?? "/etc/systemd/system",
        node: process.execPath,
        script,
        args: ["--url", url, "--state-dir", stateDir, "--docker-socket", socketPath],
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
  return parseArgs({
    args: argv,
    options: {
      url: { type: "string" },
      token: { type: "string" },
      "state-dir": { type: "string" },
      "docker-socket": { type: "string" },
      nickname: { type: "string" },
      tag: { type: "string", multiple: true },
      "install-systemd": { type: "boolean" },
      "systemd-dir": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
}
