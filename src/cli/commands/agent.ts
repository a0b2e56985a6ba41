// `berth agent …`: the Berth agent (src/agent/) run by the berth command, so that the command
// `berth node byo` prints works where the berth package is installed. Its arguments go to the
// agent untouched (main.ts dispatches before commander parses); the commander entry gives help
// and completion its options, from the agent's own table.
import { type Command, Option } from "commander";
import { AGENT_OPTIONS, type AgentOption } from "../../agent/options.ts";
import { loadPart } from "../parts.ts";
import { ownArguments } from "./completion.ts";

interface AgentModule {
  main(
    argv: string[],
    env: NodeJS.ProcessEnv,
    o: { program: string; script: string; scriptArgs: string[] },
  ): Promise<number>;
}

export function registerAgent(program: Command): void {
  const agent = program
    .command("agent")
    .description("run the Berth agent: make this server's Docker engine a node (see berth node byo)")
    .helpOption(false);
  ownArguments.add(agent);
  for (const [name, o] of Object.entries(AGENT_OPTIONS) as [string, AgentOption][])
    agent.addOption(
      new Option(`${o.short ? `-${o.short}, ` : ""}--${name}${o.value ? ` ${o.value}` : ""}`, o.description),
    );
}

/** Runs the agent with `argv` (what follows `berth agent`); resolves with its exit status. */
export async function runAgent(argv: readonly string[]): Promise<number> {
  const { main } = await loadPart<AgentModule>("agent");
  // The systemd unit runs the agent again through this same berth: `node <berth> agent --url …`.
  return main([...argv], process.env, {
    program: "berth agent",
    script: process.argv[1] ?? "berth",
    scriptArgs: ["agent"],
  });
}
