// Log streams (containers, services, actions) and exec, over the server's WebSockets.
import { StringDecoder } from "node:string_decoder";
import type WebSocket from "ws";
import type { Client, Query } from "./client.ts";
import { CliError } from "./errors.ts";
import type { Output } from "./output.ts";

export interface LogOptions {
  follow: boolean;
  tail?: number;
  /** Service logs: prefix each line with the container that wrote it. */
  prefixSource?: boolean;
  /** Action logs carry lines without their newline. */
  addNewline?: boolean;
}

/** The fields of a stream frame the CLI reads (spec "Streams"); a frame may carry others. */
interface Frame {
  type?: string;
  log?: unknown;
  source?: unknown;
  streamType?: string;
  output?: unknown;
  error?: unknown;
  data?: { errorMessage?: unknown };
}

/** A frame's JSON, or undefined when the text is not a JSON object. */
function frameOf(text: string): Frame | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Frame) : undefined;
  } catch {
    return undefined;
  }
}

function errorOf(frame: Frame | undefined): string | undefined {
  if (frame?.type !== "error") return undefined;
  return String(frame.data?.errorMessage ?? frame.error ?? "stream error");
}

/** Prints a log stream until the server closes it (or forever with follow). */
export async function printLogs(client: Client, out: Output, path: string, opts: LogOptions): Promise<void> {
  const query: Query = { follow: opts.follow, tail: opts.tail };
  let failure: string | undefined;
  const onMessage = (data: WebSocket.RawData, isBinary: boolean) => {
    if (isBinary) return;
    const frame = frameOf(data.toString());
    if (!frame) return;
    const error = errorOf(frame);
    if (error) {
      failure = error;
      return;
    }
    if (frame?.type !== "log" || typeof frame.log !== "string") return;
    let text: string = frame.log;
    if (opts.addNewline && !text.endsWith("\n")) text += "\n";
    if (opts.prefixSource && typeof frame.source === "string") {
      let paint = colours.get(frame.source);
      if (!paint) {
        paint = palette[colours.size % palette.length]!;
        colours.set(frame.source, paint);
      }
      const prefix = paint(`${frame.source} | `);
      text = text
        .split(/(?<=\n)/)
        .map((l) => prefix + l)
        .join("");
    }
    (frame.streamType === "stderr" ? process.stderr : out.stdout).write(text);
  };
  const palette = [out.c.cyan, out.c.magenta, out.c.yellow, out.c.green, out.c.blue];
  const colours = new Map<string, (s: string) => string>();
  const closed = await (await client.connect(path, query, onMessage)).closed;
  if (!failure && closed.code !== 1000 && closed.code !== 1005)
    failure = `the log stream broke (${closed.code} ${closed.reason})`.trim();
  if (failure) throw new CliError(failure);
}

export interface ExecOptions {
  command: string;
  /** Run on a terminal (raw mode, resize, Ctrl-C goes to the command). */
  tty: boolean;
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}

/** Runs a command in a container; resolves with its exit code. */
export async function execIn(client: Client, containerUri: string, opts: ExecOptions): Promise<number> {
  const query: Query = { command: opts.command };
  if (opts.tty) {
    query.tty = true;
    if (opts.stdout.rows && opts.stdout.columns) {
      query.rows = opts.stdout.rows;
      query.cols = opts.stdout.columns;
    }
  }
  let failure: string | undefined;
  const onMessage = (data: WebSocket.RawData, isBinary: boolean) => {
    if (isBinary) return;
    const frame = frameOf(data.toString());
    if (!frame) return;
    const error = errorOf(frame);
    if (error) failure = error;
    else if (frame?.type === "exec" && typeof frame.output === "string")
      (frame.streamType === "stderr" ? opts.stderr : opts.stdout).write(frame.output);
  };
  const { ws, closed: whenClosed } = await client.connect(`${containerUri}exec/`, query, onMessage);
  const { stdin, stdout } = opts;
  const decoder = new StringDecoder("utf8");
  const send = (data: string | Buffer, binary: boolean) => {
    if (ws.readyState === ws.OPEN) ws.send(data, { binary });
  };
  const onData = (chunk: Buffer) => {
    // On a terminal, keys are text; through pipes the bytes go on as they are.
    if (opts.tty) {
      const text = decoder.write(chunk);
      if (text) send(text, false);
    } else send(chunk, true);
  };
  const onEnd = () => send("\u0004", false);
  const onResize = () => {
    if (stdout.rows && stdout.columns)
      send(Buffer.from(JSON.stringify({ type: "resize", rows: stdout.rows, cols: stdout.columns })), true);
  };
  const raw = opts.tty && stdin.isTTY === true;
  if (raw) stdin.setRawMode(true);
  stdin.on("data", onData);
  stdin.on("end", onEnd);
  if (opts.tty) stdout.on("resize", onResize);
  stdin.resume();

  const closed = await whenClosed;
  stdin.off("data", onData);
  stdin.off("end", onEnd);
  stdout.off("resize", onResize);
  if (raw) stdin.setRawMode(false);
  stdin.pause();
  if (failure) throw new CliError(failure);
  const m = /^exit[_ ]code[= ](\d+)$/.exec(closed.reason);
  if (closed.code === 1000 && m) return Number(m[1]);
  throw new CliError(`the exec stream closed without an exit code (${closed.code} ${closed.reason})`.trim());
}
