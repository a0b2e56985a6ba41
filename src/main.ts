// Composition root: config → store → identity → actions → http. `npm start` runs this file.
import { ActionEngine } from "./actions/engine.ts";
import { Relations } from "./actions/relations.ts";
import { type AppDeps, buildApp } from "./api/app.ts";
import { Catalogue } from "./catalogue/catalogue.ts";
import { type Config, ConfigError, loadConfig } from "./config/index.ts";
import { systemClock } from "./domain/time.ts";
import { IdentityService } from "./identity/service.ts";
import { openDatabase } from "./store/db.ts";
import { migrateToLatest } from "./store/migrations.ts";
import { Store } from "./store/store.ts";

export interface Extensions {
  /** Registers extra action kinds and routes (used by test fixtures). */
  extend?(parts: { actions: ActionEngine; store: Store }): Pick<AppDeps, "routes">;
}

export async function startServer(config: Config, ext: Extensions = {}) {
  const db = openDatabase(config.databaseUrl);
  await migrateToLatest(db.kysely, db.dialect);
  const store = new Store(db.kysely, db.dialect);
  const clock = systemClock;
  const identity = new IdentityService(store, clock);

  const boot = await identity.bootstrapAdmin(config.admin);
  if (boot?.generated) {
    // Printed once, on the first start only: the database keeps only hashes.
    process.stdout.write(
      `\nBerth created the administrator account:\n  username: ${boot.username}\n  password: ${boot.password}\n  API key:  ${boot.apiKey}\nKeep them now; they are not shown again.\n\n`,
    );
  }

  const actions = new ActionEngine({
    store,
    clock,
    leaseMs: config.actionLeaseMs,
    stepTimeoutMs: config.actionStepTimeoutMs,
    pollMs: config.actionPollMs,
    maxAttempts: config.actionMaxAttempts,
  });
  const relations = new Relations();
  const catalogue = Catalogue.load();
  const extra = ext.extend?.({ actions, store }) ?? {};
  const app = await buildApp({
    store,
    identity,
    actions,
    relations,
    catalogue,
    publicUrl: config.publicUrl,
    logLevel: config.logLevel,
    routes: extra.routes,
  });
  actions.start();
  await app.listen({ host: config.listen.host, port: config.listen.port });

  const close = async () => {
    await actions.stop();
    await app.close();
    await db.close();
  };
  return { app, store, actions, close };
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
  const server = await startServer(config);
  let closing = false;
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      if (closing) return;
      closing = true;
      void server.close().then(() => process.exit(0));
    });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err) => {
    process.stderr.write(`berth: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
