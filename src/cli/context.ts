// What every command gets from its options: a client for the chosen namespace and an output.
import type { Command } from "commander";
import { Client, type Reply } from "./client.ts";
import { configPath, credentials, readConfig } from "./config.ts";
import { colorEnabled, Output } from "./output.ts";
import { followAction } from "./sync.ts";

export interface Ctx {
  client: Client;
  out: Output;
  env: NodeJS.ProcessEnv;
  configFile: string;
}

export interface GlobalOptions {
  namespace?: string;
  json?: boolean;
  color?: boolean;
  quiet?: boolean;
  sync?: boolean;
}

export function contextOf(cmd: Command, env: NodeJS.ProcessEnv = process.env): Ctx {
  const o = cmd.optsWithGlobals<GlobalOptions>();
  const configFile = configPath(env);
  const creds = credentials(env, readConfig(configFile));
  const out = new Output({
    json: o.json === true,
    quiet: o.quiet === true,
    color: colorEnabled(env, process.stdout, o.color !== false),
    tty: process.stdout.isTTY === true,
  });
  return { client: new Client(creds, o.namespace || creds.namespace), out, env, configFile };
}

/**
 * Ends an asynchronous operation: with `--sync` waits for its action (non-zero exit unless it
 * succeeds) and prints the object as it is then; otherwise prints what the server answered.
 */
export async function finish(
  c: Ctx,
  reply: Reply,
  opts: { sync?: boolean; refetch?: string },
): Promise<unknown> {
  let body = reply.body;
  if (opts.sync && reply.actionUri) {
    try {
      await followAction(c.client, c.out, reply.actionUri);
    } catch (err) {
      // The object is still the answer (scripts read its uuid); the exit code tells the outcome.
      c.out.done(body);
      throw err;
    }
    if (opts.refetch) {
      try {
        body = await c.client.get(opts.refetch);
      } catch {
        // gone (terminated and purged): the answer to the call is what there is
      }
    }
  }
  c.out.done(body);
  return body;
}
