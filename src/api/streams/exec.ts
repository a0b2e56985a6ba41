// Exec (CONTRACT §9): `/api/app/v1/[ns/]container/<uuid>/exec/?command=<shell command>` runs
// `sh -c <command>` (default `sh`) in the container. Text frames from the client are stdin, and a
// frame that is exactly "\u0004" ends it; output comes back as
// `{"type":"exec","output","streamType"}` and the server closes the socket (1000, reason
// "exit_code=N") when the process exits. `tty=true` (with `rows` and `cols`) runs the command on a
// terminal; a binary frame holding `{"type":"resize","rows","cols"}` resizes it (any other binary
// frame is stdin, as before). Failures are `{"type":"error","data":{"errorMessage"}}`
// followed by a 1011 close. Exec needs a Running container: any other state is a 409 on the
// upgrade, like the REST operations' state refusals, so no socket is opened for nothing.
import { StringDecoder } from "node:string_decoder";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { RawData } from "ws";
import { conflict, invalidField, notFound, stateConflict } from "../../domain/errors.ts";
import type { ExecSession, TerminalSize } from "../../orchestrator/container-io.ts";
import type { NodeRow } from "../../store/nodes.ts";
import type { ContainerRow } from "../../store/services.ts";
import { namespaceOf } from "../namespaces.ts";
import { nsPaths } from "../routing.ts";
import { type StreamContext, streamRoute } from "./route.ts";
import { CLOSE, closeSocket, drained, sendErrorFrame, sendJson } from "./sockets.ts";

/** The end-of-input frame (Ctrl-D), as the historical clients send it. */
const END_OF_INPUT = "\u0004";

interface ExecPlan {
  container: ContainerRow;
  engineId: string;
  node: NodeRow;
  command: string;
  tty: boolean;
  size: TerminalSize | undefined;
}

const MAX_TERMINAL_SIDE = 1000;

/** A resize request: a binary frame that is exactly this JSON object; anything else is stdin. */
export function parseResize(bytes: Buffer): TerminalSize | undefined {
  if (bytes.length > 200 || bytes[0] !== 0x7b) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString("utf8"));
  } catch {
    return undefined;
  }
  if (!value || typeof value !== "object") return undefined;
  const { type, rows, cols } = value as Record<string, unknown>;
  const side = (n: unknown) =>
    Number.isInteger(n) && (n as number) >= 1 && (n as number) <= MAX_TERMINAL_SIDE;
  if (type !== "resize" || !side(rows) || !side(cols)) return undefined;
  return { rows: rows as number, cols: cols as number };
}

type Stdin = string | Buffer | typeof END_OF_INPUT;

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

export function execRoutes(app: FastifyInstance, ctx: StreamContext): void {
  streamRoute(app, ctx, {
    urls: nsPaths("/api/app/v1/{ns}container/:uuid/exec/"),
    summary: "Run a command in a container",
    description:
      'Runs `sh -c <command>` in a Running container (otherwise 409 on the upgrade). Client text frames are stdin; a frame "\\u0004" alone ends it. ' +
      'With tty=true the command runs on a terminal of rows × cols; a binary frame {"type":"resize","rows","cols"} resizes it (other binary frames are stdin). ' +
      'Server frames {"type":"exec","output","streamType"}; the server closes with 1000 and reason "exit_code=N" when the command exits; errors are {"type":"error","data":{"errorMessage"}} then 1011.',
    access: "namespace",
    params: Type.Object({ uuid: Type.String(), namespace: Type.Optional(Type.String()) }),
    querystring: Type.Object({
      command: Type.Optional(Type.String({ default: "sh", description: "shell command line (sh -c)" })),
      tty: Type.Optional(
        Type.Boolean({ default: false, description: "run on a terminal (output all on stdout)" }),
      ),
      rows: Type.Optional(
        Type.Integer({ minimum: 1, maximum: MAX_TERMINAL_SIDE, description: "terminal rows, with tty" }),
      ),
      cols: Type.Optional(
        Type.Integer({ minimum: 1, maximum: MAX_TERMINAL_SIDE, description: "terminal columns, with tty" }),
      ),
      user: Type.Optional(
        Type.String({ description: "username, for clients that send no Authorization header" }),
      ),
      token: Type.Optional(Type.String({ description: "API key, with user" })),
    }),
    async prepare(req, { params, query }): Promise<ExecPlan> {
      const ns = namespaceOf(req);
      const c = await ctx.store.services.findContainer(params.uuid);
      if (!c || c.namespace !== ns) throw notFound("container");
      if (c.state !== "Running" || !c.engine_id)
        throw stateConflict(`container ${c.name}`, c.state, "exec", ["Running"]);
      const node = await ctx.store.nodes.findNode(c.node_uuid);
      if (!node || node.state === "Terminated")
        throw conflict(`the node of container ${c.name} is gone`, "invalid_state");
      const command = query.command ?? "sh";
      if (command.trim() === "") throw invalidField("command", "must not be empty");
      if ((query.rows === undefined) !== (query.cols === undefined))
        throw invalidField(
          query.rows === undefined ? "rows" : "cols",
          "must be given with rows and cols both",
        );
      const size =
        query.rows !== undefined && query.cols !== undefined
          ? { rows: query.rows, cols: query.cols }
          : undefined;
      return { container: c, engineId: c.engine_id, node, command, tty: query.tty ?? false, size };
    },
    namespace: (plan) => plan.container.namespace,
    async open(ws, plan) {
      const abort = new AbortController();
      ws.once("close", () => abort.abort());
      // Stdin may arrive before the engine has started the command: it is held until then.
      const held: Stdin[] = [];
      let session: ExecSession | undefined;
      let inputEnded = false;
      const feed = (s: ExecSession, input: Stdin) => {
        if (inputEnded) return;
        if (input === END_OF_INPUT) {
          inputEnded = true;
          s.end();
        } else {
          s.write(input);
        }
      };
      let size = plan.size;
      const resize = (s: ExecSession, to: TerminalSize) => {
        s.resize(to).catch(() => {}); // a resize racing the command's end changes nothing
      };
      ws.on("message", (data, isBinary) => {
        const bytes = toBuffer(data);
        const wanted = isBinary && plan.tty ? parseResize(bytes) : undefined;
        if (wanted) {
          if (session) resize(session, wanted);
          else size = wanted;
          return;
        }
        const input: Stdin = isBinary ? bytes : bytes.toString("utf8");
        if (session) feed(session, input);
        else held.push(input);
      });

      try {
        session = await ctx.containers.exec(
          { node_uuid: plan.container.node_uuid, engineId: plan.engineId },
          { cmd: ["sh", "-c", plan.command], tty: plan.tty, signal: abort.signal },
        );
      } catch (err) {
        sendErrorFrame(ws, `exec in ${plan.container.name}: ${errorText(err)}`);
        closeSocket(ws, CLOSE.internal, "exec failed");
        return;
      }
      if (plan.tty && size) resize(session, size);
      for (const input of held.splice(0)) feed(session, input);

      // Output chunks may split a multi-byte character: each stream decodes on its own.
      const decoders = { stdout: new StringDecoder("utf8"), stderr: new StringDecoder("utf8") };
      const send = async (streamType: "stdout" | "stderr", output: string) => {
        if (!output) return true;
        if (!(await drained(ws, ctx.settings.maxBufferedBytes))) return false;
        sendJson(ws, { type: "exec", output, streamType });
        return true;
      };
      try {
        for await (const out of session.output) {
          if (!(await send(out.stream, decoders[out.stream].write(out.data)))) break;
        }
        await send("stdout", decoders.stdout.end());
        await send("stderr", decoders.stderr.end());
        if (abort.signal.aborted) return; // the client left; the command runs on without its stdin
        const exitCode = await session.exitCode;
        closeSocket(ws, CLOSE.normal, `exit_code=${exitCode}`);
      } catch (err) {
        if (abort.signal.aborted) return;
        sendErrorFrame(ws, `exec in ${plan.container.name}: ${errorText(err)}`);
        closeSocket(ws, CLOSE.internal, "exec failed");
      }
    },
  });
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
