// The agent's command-line options, in one table: the agent parses them (main.ts) and the `berth`
// command line lists them for `berth agent --help` and shell completion without loading the agent.
// No imports: the CLI bundle takes this file and nothing else of the agent.

export interface AgentOption {
  type: "string" | "boolean";
  multiple?: boolean;
  short?: string;
  /** How the value is shown in the usage text. */
  value?: string;
  description: string;
}

export const AGENT_OPTIONS = {
  url: {
    type: "string",
    value: "<url>",
    description: "Berth's address, as this server reaches it (http://host:8000)",
  },
  token: {
    type: "string",
    value: "<token>",
    description: "registration token from berth node byo or POST /api/infra/v1/token/ (first start only)",
  },
  "state-dir": {
    type: "string",
    value: "<dir>",
    description: "where the node identity is kept (default /var/lib/berth-agent)",
  },
  "docker-socket": {
    type: "string",
    value: "<path>",
    description: "the local engine's socket (default from DOCKER_HOST, else /var/run/docker.sock)",
  },
  nickname: { type: "string", value: "<name>", description: "the node's nickname in Berth" },
  tag: { type: "string", multiple: true, value: "<name>", description: "a node tag (repeatable)" },
  "no-router": {
    type: "boolean",
    description: "run no router (Caddy) here: something else serves ports 80 and 443",
  },
  "install-systemd": {
    type: "boolean",
    description: "write berth-agent.service and enable it (the service runs without the token)",
  },
  "systemd-dir": {
    type: "string",
    value: "<dir>",
    description: "where the unit goes (default /etc/systemd/system)",
  },
  help: { type: "boolean", short: "h", description: "this text" },
} as const satisfies Record<string, AgentOption>;

/** The usage text, for the program name it runs under (`berth-agent`, `berth agent`). */
export function agentUsage(program: string): string {
  const rows = Object.entries(AGENT_OPTIONS).map(([name, o]: [string, AgentOption]) => {
    const flag = `${o.short ? `-${o.short}, ` : ""}--${name}${o.value ? ` ${o.value}` : ""}`;
    return `  ${flag.padEnd(25)}${o.description}`;
  });
  return `usage: ${program} --url <Berth URL> [--token <token>] [options]\n\n${rows.join("\n")}\n`;
}
