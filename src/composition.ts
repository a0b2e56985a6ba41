// What every capability module (src/<capability>/module.ts) is assembled from, and what it gives
// back to platform.ts, which lists the modules in order. The log exists before any of them.
import type { FastifyInstance } from "fastify";
import type { AnswerCache } from "./api/answer-cache.ts";
import type { ServerLog } from "./api/logger.ts";
import type { Config } from "./config/index.ts";
import type { Clock } from "./domain/time.ts";
import type { SecretBox } from "./identity/secret-box.ts";
import type { Metrics } from "./ops/metrics.ts";
import type { Store } from "./store/store.ts";

/** The parts every module may use, made first by platform.ts. */
export interface Core {
  config: Config;
  clock: Clock;
  log: ServerLog;
  /** A reporter of one background worker's errors to the log. */
  onError(what: string): (err: unknown) => void;
  store: Store;
  metrics: Metrics;
  /** This process's name among replicas (logs, leases, metrics). */
  replicaId: string;
  /** Replicas share one PostgreSQL; SQLite is one process, which owns every duty. */
  replicated: boolean;
  box: SecretBox;
  /** Rendered GET answers, checked against the change feed on every request. */
  answers: AnswerCache;
  /** Registries reached over plain HTTP, Berth's own included: engines of local nodes trust them too. */
  insecureRegistries: string[];
}

/** Routes a module serves, registered by the HTTP app in the order platform.ts lists them. */
export type Routes = ((app: FastifyInstance) => void)[];
