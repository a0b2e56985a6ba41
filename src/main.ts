// Composition root: `npm start` runs this file. Reads the configuration, assembles the
// platform (src/platform.ts), bootstraps the administrator and listens.
import { type Config, ConfigError, loadConfig } from "./config/index.ts";
import { isNodeIoError } from "./drivers/io-errors.ts";
import { assemblePlatform, type Platform, type PlatformOptions } from "./platform.ts";

export async function startServer(config: Config, opts: PlatformOptions = {}): Promise<Platform> {
  const platform = await assemblePlatform(config, opts);
  const boot = await platform.identity.bootstrapAdmin(config.admin);
  if (boot?.generated) {
    // Printed once, on the first start only: the database keeps only hashes.
    process.stdout.write(
      `\nBerth created the administrator account:\n  username: ${boot.username}\n  password: ${boot.password}\n  API key:  ${boot.apiKey}\nKeep them now; they are not shown again.\n\n`,
    );
  }
  // The HTTP app compiles its routes' validators and serializers first: that is CPU work that
  // would otherwise stall the steps of actions the workers resume at start.
  await platform.app.ready();
  await platform.start();
  await platform.app.listen({ host: config.listen.host, port: config.listen.port });
  if (config.nodes.autoAttach) await attachDefaultEngine(platform);
  return platform;
}

/**
 * A newcomer's first service should run for real: when a Docker engine answers on DOCKER_HOST
 * (or the default socket) and the administrator's namespace has no node yet, attach it.
 */
async function attachDefaultEngine(p: Platform): Promise<void> {
  const admin = await p.store.identity.firstAdmin();
  if (!admin || (await p.store.nodes.countNodes(admin.username)) > 0) return;
  try {
    const node = await p.attachedEngines.attach(admin.username, {
      engine_url: p.config.nodes.dockerHost,
      nickname: "this host",
    });
    p.app.log.info(`attached the Docker engine at ${p.config.nodes.dockerHost} as node ${node.uuid}`);
  } catch {
    p.app.log.info(`no Docker engine answers at ${p.config.nodes.dockerHost}; add nodes through the API`);
  }
}

/**
 * SIGTERM and SIGINT stop gracefully: no new connections or claims, streams closed with 1001,
 * running actions get half the time to finish and are then released to other replicas; whatever
 * happens, the process is gone within BERTH_SHUTDOWN_TIMEOUT_MS.
 */
export function stopOnSignals(server: Platform): void {
  let closing = false;
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      if (closing) return;
      closing = true;
      const timeoutMs = server.config.shutdownTimeoutMs;
      setTimeout(() => {
        server.app.log.error(`stopping took longer than ${timeoutMs} ms; exiting now`);
        process.exit(1);
      }, timeoutMs).unref();
      server.app.log.info(`${signal}: stopping within ${timeoutMs} ms`);
      void server
        .close({ graceMs: Math.floor(timeoutMs / 2) })
        .then(() => process.exit(0))
        .catch((err: unknown) => {
          process.stderr.write(
            `berth: stopping failed: ${err instanceof Error ? err.message : String(err)}\n`,
          );
          process.exit(1);
        });
    });
  }
}

/** Where the guard reports: the server log once there is one. */
export interface GuardLog {
  error(obj: object, msg: string): void;
}

/**
 * The last-resort process guard. An exception nobody caught, or a rejection nobody handled, that
 * comes from one node's I/O (`drivers/io-errors.ts` `isNodeIoError`: the drivers' errors of a node,
 * or Node's errors thrown while the engine clients or the tunnel read a node's answer) is logged
 * and the process keeps serving: a node someone else runs must not be able to stop Berth for
 * everyone (answers are bounded first, in drivers/bounds.ts; this is for what a bound missed).
 * Anything else (a TypeError, a failed assertion, the database's or the HTTP server's errors) is
 * printed and ends the process with status 1, as Node would without the guard.
 */
export function guardProcess(log: () => GuardLog | undefined): void {
  const handler = (what: string) => (err: unknown) => {
    if (isNodeIoError(err)) {
      const line = `${what} from a node's I/O; Berth keeps serving`;
      const to = log();
      if (to) to.error({ err }, line);
      else process.stderr.write(`berth: ${line}: ${err instanceof Error ? err.stack : String(err)}\n`);
      return;
    }
    process.stderr.write(
      `berth: ${what}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  };
  process.on("uncaughtException", handler("uncaught exception"));
  process.on("unhandledRejection", handler("unhandled rejection"));
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`berth: invalid configuration: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  let server: Platform | undefined;
  guardProcess(() => server?.app.log);
  server = await startServer(config);
  stopOnSignals(server);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err) => {
    process.stderr.write(`berth: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
