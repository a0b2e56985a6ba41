// Which errors come from one node's I/O: what the last-resort process guard (src/main.ts) may log
// and survive. A node is outside Berth's control (an agent on someone's server, an engine on the
// network); whatever it sends must cost at most that node's calls, never the process. Programming
// errors are never among them: a process that keeps running with a bug in it is worse than a
// restart, so they end it as before.
import { AnswerBoundError } from "./bounds.ts";
import { EngineError } from "./engine.ts";
import { TunnelProtocolError } from "./tunnel/mux.ts";

/** The code that reads engines' and agents' answers: an error thrown in it comes from their I/O. */
const NODE_IO_FRAMES =
  /[/\\](?:src[/\\]drivers[/\\](?:docker|tunnel)|node_modules[/\\](?:docker-modem|dockerode))[/\\]/;

/** Errors that mean a mistake in the program wherever they are thrown. */
const PROGRAMMING_ERRORS = [TypeError, ReferenceError, SyntaxError, EvalError, URIError];

/**
 * Whether an error that reached the process (an uncaught exception, an unhandled rejection) comes
 * from one node's I/O:
 * - never a TypeError, ReferenceError, SyntaxError, EvalError, URIError or failed assertion;
 * - always the drivers' own errors of a node (EngineError, a tunnel protocol breach, an answer past
 *   a bound);
 * - otherwise only when the stack shows it was thrown while Berth's engine clients or the tunnel
 *   handled a node's connection (src/drivers/docker, src/drivers/tunnel, dockerode, docker-modem):
 *   Node's own errors there (a socket reset, ERR_STRING_TOO_LONG, a buffer too large) are the far
 *   end's doing. The same error elsewhere (the database, the HTTP server) still ends the process.
 */
export function isNodeIoError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (PROGRAMMING_ERRORS.some((kind) => err instanceof kind)) return false;
  if ((err as { code?: unknown }).code === "ERR_ASSERTION") return false;
  if (err instanceof EngineError || err instanceof TunnelProtocolError || err instanceof AnswerBoundError)
    return true;
  return NODE_IO_FRAMES.test(err.stack ?? "");
}
