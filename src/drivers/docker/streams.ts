// Decoding of the Engine API's byte streams: the multiplexed stdout/stderr framing, timestamped log
// lines and newline-delimited JSON. Written as async generators over chunks so callers can stop early
// (breaking out of a for-await destroys the HTTP response underneath).
import { StringDecoder } from "node:string_decoder";
import { ENGINE_ANSWER_BYTES, tooLarge } from "../bounds.ts";
import type { OutputStream } from "../engine.ts";

export interface Frame {
  stream: OutputStream;
  data: Buffer;
}

const toBuffer = (chunk: Buffer | string): Buffer => (typeof chunk === "string" ? Buffer.from(chunk) : chunk);

/**
 * Splits Docker's multiplexed stream (8-byte header: stream type, 3 zero bytes, big-endian length) into
 * frames. Frames on stdin (type 0) are never sent by the engine for output and are dropped. A frame
 * longer than `maxFrameBytes` fails the stream when its header arrives (it would be held whole).
 */
export async function* demultiplex(
  source: AsyncIterable<Buffer | string>,
  maxFrameBytes: number = ENGINE_ANSWER_BYTES.frame,
): AsyncGenerator<Frame> {
  let pending: Buffer = Buffer.alloc(0);
  for await (const chunk of source) {
    pending = pending.length === 0 ? toBuffer(chunk) : Buffer.concat([pending, toBuffer(chunk)]);
    while (pending.length >= 8) {
      const length = pending.readUInt32BE(4);
      if (length > maxFrameBytes) throw tooLarge(`an output frame of ${length} bytes`, maxFrameBytes);
      if (pending.length < 8 + length) break;
      const type = pending[0];
      const data = pending.subarray(8, 8 + length);
      pending = pending.subarray(8 + length);
      if (type === 1) yield { stream: "stdout", data };
      else if (type === 2) yield { stream: "stderr", data };
    }
  }
}

/** Raw (tty) output: everything is stdout. */
export async function* rawFrames(source: AsyncIterable<Buffer | string>): AsyncGenerator<Frame> {
  for await (const chunk of source) yield { stream: "stdout", data: toBuffer(chunk) };
}

/** Parses Docker's RFC 3339 timestamps with nanoseconds (Date.parse wants at most milliseconds). */
export function parseDockerTime(value: string | undefined): number | undefined {
  if (!value || value.startsWith("0001-01-01")) return undefined;
  const ms = Date.parse(value.replace(/(\.\d{3})\d+/, "$1"));
  return Number.isNaN(ms) ? undefined : ms;
}

export interface TimedLine {
  stream: OutputStream;
  line: string;
  timestampMs: number;
}

const TIMESTAMP = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) /;

/**
 * Turns frames of `logs?timestamps=1` into lines. Each log message starts with its timestamp; a message
 * without a trailing newline (a partial line) is joined with the next message of the same stream.
 * With multiplexed frames each frame is one message; raw tty output is split at newlines instead.
 * A line that grows past `maxLineChars` without a newline is passed on in pieces of that size, so
 * output without newlines is never held whole.
 */
export async function* timestampedLines(
  frames: AsyncIterable<Frame>,
  framed: boolean,
  maxLineChars: number = ENGINE_ANSWER_BYTES.logLine,
): AsyncGenerator<TimedLine> {
  const decoders = { stdout: new StringDecoder("utf8"), stderr: new StringDecoder("utf8") };
  const partial: Record<OutputStream, { text: string; timestampMs: number } | undefined> = {
    stdout: undefined,
    stderr: undefined,
  };
  let rawPending = "";

  function* message(stream: OutputStream, text: string): Generator<TimedLine> {
    const match = TIMESTAMP.exec(text);
    const timestampMs = (match ? parseDockerTime(match[1]) : undefined) ?? Date.now();
    const body = match ? text.slice(match[0].length) : text;
    const before = partial[stream];
    const joined = before
      ? { text: before.text + body, timestampMs: before.timestampMs }
      : { text: body, timestampMs };
    partial[stream] = undefined;
    // One message holds one line in practice, but split defensively so every yielded line ends once.
    let start = 0;
    for (let nl = joined.text.indexOf("\n"); nl >= 0; nl = joined.text.indexOf("\n", start)) {
      yield { stream, line: joined.text.slice(start, nl + 1), timestampMs: joined.timestampMs };
      start = nl + 1;
    }
    while (joined.text.length - start > maxLineChars) {
      yield { stream, line: joined.text.slice(start, start + maxLineChars), timestampMs: joined.timestampMs };
      start += maxLineChars;
    }
    if (start < joined.text.length)
      partial[stream] = { text: joined.text.slice(start), timestampMs: joined.timestampMs };
  }

  for await (const frame of frames) {
    const text = decoders[frame.stream].write(frame.data);
    if (framed) {
      yield* message(frame.stream, text);
      continue;
    }
    rawPending += text;
    let nl = rawPending.indexOf("\n");
    while (nl >= 0) {
      yield* message("stdout", rawPending.slice(0, nl + 1));
      rawPending = rawPending.slice(nl + 1);
      nl = rawPending.indexOf("\n");
    }
    // Raw output without a newline: a message (its timestamp first) is never longer than a line.
    if (rawPending.length > maxLineChars) {
      yield* message("stdout", rawPending);
      rawPending = "";
    }
  }
  if (rawPending) yield* message("stdout", rawPending);
  for (const stream of ["stdout", "stderr"] as const) {
    const rest = partial[stream];
    if (rest) yield { stream, line: rest.text, timestampMs: rest.timestampMs };
  }
}

/**
 * Newline-delimited JSON (events, pull and load progress); blank lines are skipped. A line longer
 * than `maxLineBytes` fails the stream as soon as it is that long (it is never held whole).
 */
export async function* jsonLines(
  source: AsyncIterable<Buffer | string>,
  maxLineBytes: number = ENGINE_ANSWER_BYTES.jsonLine,
): AsyncGenerator<unknown> {
  const decoder = new StringDecoder("utf8");
  let pending = "";
  for await (const chunk of source) {
    // Only the new text can hold the next newline.
    let from = pending.length;
    pending += typeof chunk === "string" ? chunk : decoder.write(chunk);
    let nl = pending.indexOf("\n", from);
    while (nl >= 0) {
      const line = pending.slice(0, nl).trim();
      pending = pending.slice(nl + 1);
      if (line) yield parseLine(line);
      from = 0;
      nl = pending.indexOf("\n");
    }
    if (pending.length > maxLineBytes) throw tooLarge("a line of a JSON stream", maxLineBytes);
  }
  const rest = (pending + decoder.end()).trim();
  if (rest) yield parseLine(rest);
}

function parseLine(line: string): unknown {
  try {
    return JSON.parse(line) as unknown;
  } catch {
    throw new Error(`the engine sent a line that is not JSON: ${line.slice(0, 80)}`);
  }
}
