// The Engine implementation for real Docker engines, over the Engine API (dockerode's types; the
// requests are sent by ./request.ts). Every call goes through one request primitive, so each has a
// timeout (an unreachable engine fails fast instead of hanging an action), every answer is read
// within the bounds of drivers/bounds.ts (a node that answers without end costs Berth a bounded
// amount of memory and time, never the process) and every failure becomes a typed EngineError.
import { statfs } from "node:fs/promises";
import type { Agent as HttpAgent, IncomingMessage } from "node:http";
import type { Duplex, Readable } from "node:stream";
import type Docker from "dockerode";
import {
  AnswerBoundError,
  ENGINE_ANSWER_BYTES,
  ENGINE_TIMEOUTS_MS,
  readBounded,
  withinTime,
} from "../bounds.ts";
import {
  AsyncQueue,
  type ContainerEvent,
  type ContainerSpec,
  type ContainerSummary,
  type ContainerView,
  type Engine,
  EngineError,
  type EngineInfo,
  type EventsOptions,
  EXEC_EXIT_WAIT_MS,
  type ExecOptions,
  type ExecOutput,
  type ExecSession,
  envToList,
  execStillRunning,
  type KillContainerOptions,
  type ListContainersOptions,
  type LogLine,
  type LogsOptions,
  normalizeImageRef,
  type PullImageOptions,
  type PushImageOptions,
  type RemoveContainerOptions,
  type StopContainerOptions,
  type StopOutcome,
  splitImageTag,
} from "../engine.ts";
import { type DockerEndpoint, type DockerTls, describeEndpoint, parseDockerEndpoint } from "./endpoint.ts";
import { hostsCommand } from "./hosts.ts";
import {
  containerEvent,
  containerSummary,
  containerView,
  createBody,
  type DockerEventMessage,
} from "./mapping.ts";
import { type EngineHttpError, type QueryValue, sendRequest, sendUpgrade } from "./request.ts";
import { demultiplex, type Frame, jsonLines, rawFrames, timestampedLines } from "./streams.ts";

export interface DockerEngineOptions {
  /** A parsed endpoint, or an address such as `unix:///var/run/docker.sock` or `tcp://10.0.0.5:2376`. */
  endpoint: DockerEndpoint | string;
  /** TLS material for a TCP address given as a string. */
  tls?: DockerTls;
  /** Longest wait for an ordinary call; streams only wait this long for the engine to answer. */
  callTimeoutMs?: number;
  pingTimeoutMs?: number;
  /** How long a pull, push or load may say nothing, and last in all (ENGINE_TIMEOUTS_MS by default). */
  progressTimeoutsMs?: { idleMs: number; totalMs: number };
  /**
   * Makes the connections instead of TCP (an agent's reverse tunnel: drivers/tunnel). The
   * endpoint's host and port then only name the engine in messages.
   */
  agent?: HttpAgent;
}

interface Call {
  method: "GET" | "POST" | "DELETE";
  path: string;
  query?: Record<string, QueryValue>;
  body?: object;
  file?: NodeJS.ReadableStream;
  contentType?: string;
  /** Statuses that mean success; 304 marks calls Docker answers "already so" (start, stop). */
  ok: number[];
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Sent as X-Registry-Auth; an empty object for anonymous pushes (the engine wants the header). */
  authconfig?: { username?: string; password?: string; serveraddress?: string };
  /** A 404 here means a missing image, not a missing container. */
  imageCall?: boolean;
  /** Most bytes of the answer Berth reads (json and empty modes); ENGINE_ANSWER_BYTES.json by default. */
  limit?: number;
}

/** A failure of a request: Node's network errors (with `code`), a refused status, a bound. */
type RequestError = Error & Partial<EngineHttpError> & { code?: string };

const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ENOENT",
  "EACCES",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ECONNRESET",
  "EPIPE",
  "EAI_AGAIN",
  "ENOTFOUND",
  "ECONNABORTED",
  "UND_ERR_SOCKET",
  "ERR_STREAM_PREMATURE_CLOSE",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
]);

/** Docker's wording when a registry has no such image (pull) or the engine has none (create). */
const IMAGE_MISSING =
  /no such image|manifest unknown|not found|repository does not exist|pull access denied|name unknown/i;

/** request.ts prefixes "(HTTP code 404) "; users should see the engine's words. */
function engineMessage(error: RequestError): string {
  const json = error.json;
  if (json && typeof json === "object" && "message" in json && typeof json.message === "string")
    return json.message.slice(0, 2000);
  return error.message.replace(/^\(HTTP code \d+\) /, "").trim();
}

function isAbortError(error: unknown): boolean {
  return (
    error instanceof Error && (error.name === "AbortError" || (error as RequestError).code === "ABORT_ERR")
  );
}

/** A text field of an engine's answer, as Berth stores it: a string of at most `max` characters. */
function text(value: unknown, max = 256): string | undefined {
  return typeof value === "string" ? value.slice(0, max) : undefined;
}

/** A count of an engine's answer: a finite number at least 0, else 0. */
function count(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : 0;
}

export class DockerEngine implements Engine {
  readonly endpoint: DockerEndpoint;
  private readonly agent: HttpAgent | undefined;
  private readonly callTimeoutMs: number;
  private readonly pingTimeoutMs: number;
  private readonly progressTimeoutsMs: { idleMs: number; totalMs: number };

  constructor(options: DockerEngineOptions) {
    this.endpoint =
      typeof options.endpoint === "string"
        ? parseDockerEndpoint(options.endpoint, options.tls)
        : options.endpoint;
    this.callTimeoutMs = options.callTimeoutMs ?? ENGINE_TIMEOUTS_MS.call;
    this.pingTimeoutMs = options.pingTimeoutMs ?? ENGINE_TIMEOUTS_MS.ping;
    this.progressTimeoutsMs = options.progressTimeoutsMs ?? {
      idleMs: ENGINE_TIMEOUTS_MS.progressIdle,
      totalMs: ENGINE_TIMEOUTS_MS.progressTotal,
    };
    // The tunnel's connections are plain HTTP on tunnel streams; TLS and unix sockets dial themselves.
    this.agent = "socketPath" in this.endpoint || this.endpoint.tls ? undefined : options.agent;
  }

  // ---- the request primitive ------------------------------------------------------------------

  /**
   * One Engine API call. The timeout covers the whole call for ordinary requests (answer included),
   * and only the wait for the response headers for streams, which then live until the caller's
   * signal or the engine ends them. `json` answers are read up to `call.limit` bytes and parsed,
   * `empty` ones read up to that limit and dropped.
   */
  private dial(call: Call, mode: "json" | "empty"): Promise<unknown>;
  private dial(call: Call, mode: "stream"): Promise<IncomingMessage>;
  private dial(call: Call, mode: "hijack"): Promise<Duplex>;
  private dial(call: Call, mode: "json" | "empty" | "stream" | "hijack"): Promise<unknown> {
    const timeoutMs = call.timeoutMs ?? this.callTimeoutMs;
    const timer = new AbortController();
    const signal = call.signal ? AbortSignal.any([call.signal, timer.signal]) : timer.signal;
    let timedOut = false;
    const handle = setTimeout(() => {
      timedOut = true;
      timer.abort(new Error("timeout"));
    }, timeoutMs);
    const request = { ...call, signal };
    const work = async (): Promise<unknown> => {
      if (mode === "hijack") return sendUpgrade(this.endpoint, this.agent, request, call.ok);
      const res = await sendRequest(this.endpoint, this.agent, request, call.ok);
      if (mode === "stream") return res;
      const what = `the answer to ${call.method} ${call.path}`;
      const body = await readBounded(res, call.limit ?? ENGINE_ANSWER_BYTES.json, what);
      if (mode === "empty") return undefined;
      try {
        return JSON.parse(body.toString("utf8")) as unknown;
      } catch {
        throw new EngineError(
          "other",
          `engine at ${describeEndpoint(this.endpoint)}: ${what} is not JSON (${body.length} bytes)`,
        );
      }
    };
    return work().then(
      (result) => {
        clearTimeout(handle);
        return result;
      },
      (error: unknown) => {
        clearTimeout(handle);
        if (error instanceof EngineError) throw error;
        if (call.signal?.aborted && !timedOut) throw call.signal.reason ?? error;
        throw this.toEngineError(error as RequestError, call, timedOut ? timeoutMs : undefined);
      },
    );
  }

  private toEngineError(error: RequestError, call: Call, timedOutAfterMs: number | undefined): EngineError {
    const where = describeEndpoint(this.endpoint);
    if (timedOutAfterMs !== undefined) {
      return new EngineError("unreachable", `engine at ${where} did not answer within ${timedOutAfterMs} ms`);
    }
    // An answer past a bound: the engine cannot be used as it answers (the node is Unreachable).
    if (error instanceof AnswerBoundError)
      return new EngineError("unreachable", `engine at ${where}: ${error.message}`);
    const status = error.statusCode;
    if (status === undefined) {
      if (
        (error.code && (NETWORK_CODES.has(error.code) || error.code.startsWith("HPE_"))) ||
        isAbortError(error) ||
        /socket hang up/.test(error.message)
      ) {
        return new EngineError("unreachable", `engine at ${where} is unreachable: ${error.message}`);
      }
      return new EngineError("other", error.message);
    }
    const message = engineMessage(error);
    if (status === 404) {
      const image = call.imageCall || /^no such image/i.test(message);
      return new EngineError(image ? "image_not_found" : "not_found", message, status);
    }
    if (status === 409) return new EngineError("conflict", message, status);
    return new EngineError("other", message, status);
  }

  private async json<T>(call: Call): Promise<T> {
    return (await this.dial(call, "json")) as T;
  }

  // ---- engine ------------------------------------------------------------------------------------

  async ping(): Promise<void> {
    await this.dial({ method: "GET", path: "/_ping", ok: [200], timeoutMs: this.pingTimeoutMs }, "empty");
  }

  async info(options: { signal?: AbortSignal } = {}): Promise<EngineInfo> {
    const { signal } = options;
    const [answer, versionAnswer] = await Promise.all([
      this.json<unknown>({ method: "GET", path: "/info", ok: [200], signal }),
      this.json<unknown>({ method: "GET", path: "/version", ok: [200], signal }),
    ]);
    // Facts Berth stores on the node row: each checked, strings cut, whatever the engine sent.
    const info = (answer && typeof answer === "object" ? answer : {}) as Record<keyof DockerInfo, unknown>;
    const version = (versionAnswer && typeof versionAnswer === "object" ? versionAnswer : {}) as Record<
      "ApiVersion" | "Version",
      unknown
    >;
    const id = text(info.ID);
    if (!id)
      throw new EngineError("other", `engine at ${describeEndpoint(this.endpoint)} did not say its ID`);
    return {
      id,
      name: text(info.Name) ?? "",
      cpus: count(info.NCPU),
      memoryMb: Math.floor(count(info.MemTotal) / (1024 * 1024)),
      diskGb: await this.diskGb(text(info.DockerRootDir, 4096)),
      engineVersion: text(info.ServerVersion) ?? text(version.Version) ?? "",
      apiVersion: text(version.ApiVersion) ?? "",
      storageDriver: text(info.Driver) ?? "",
      execDriver: text(info.ExecutionDriver) || "native",
      operatingSystem: text(info.OperatingSystem) ?? "",
    };
  }

  /**
   * The Engine API does not report disk capacity. When the engine is on this machine (a unix socket)
   * the filesystem of its data root is measured; for remote engines the size stays unknown.
   */
  private async diskGb(dataRoot: string | undefined): Promise<number | undefined> {
    if (!dataRoot || !("socketPath" in this.endpoint)) return undefined;
    try {
      const stats = await statfs(dataRoot);
      return Math.round(((stats.blocks * stats.bsize) / 1024 ** 3) * 10) / 10;
    } catch {
      return undefined;
    }
  }

  // ---- images ------------------------------------------------------------------------------------

  async imageId(ref: string): Promise<string | undefined> {
    try {
      const image = await this.json<{ Id: string }>({
        method: "GET",
        path: `/images/${ref}/json`,
        ok: [200],
        imageCall: true,
      });
      return image.Id;
    } catch (error) {
      if (error instanceof EngineError && error.kind === "image_not_found") return undefined;
      throw error;
    }
  }

  async hasImage(ref: string): Promise<boolean> {
    return (await this.imageId(ref)) !== undefined;
  }

  async pullImage(ref: string, options: PullImageOptions = {}): Promise<void> {
    const auth = options.auth;
    let response: IncomingMessage;
    try {
      response = await this.dial(
        {
          method: "POST",
          path: "/images/create",
          // The tag travels inside fromImage; an empty `tag` would make Docker pull every tag.
          query: { fromImage: normalizeImageRef(ref) },
          ok: [200],
          signal: options.signal,
          imageCall: true,
          authconfig: auth
            ? { username: auth.username, password: auth.password, serveraddress: auth.serverAddress }
            : undefined,
        },
        "stream",
      );
    } catch (error) {
      throw this.pullError(error);
    }
    // Failures after the engine started answering arrive as {"error": …} messages in the stream.
    for await (const message of this.progress(response, `the progress of pulling ${ref}`)) {
      const progress = message as { status?: string; id?: string; progress?: string; error?: string };
      if (progress.error) throw this.pullError(new EngineError("other", progress.error));
      if (progress.status) {
        const line = [progress.id, progress.status, progress.progress].filter(Boolean).join(" ");
        options.onProgress?.(line.replace(/^(\S+) /, "$1: "));
      }
    }
  }

  /** A registry that has no such image answers in several ways; they all mean image_not_found. */
  private pullError(error: unknown): unknown {
    if (!(error instanceof EngineError) || error.kind === "unreachable") return error;
    if (error.statusCode === 404 || IMAGE_MISSING.test(error.message)) {
      return new EngineError("image_not_found", error.message, error.statusCode);
    }
    return new EngineError("other", error.message, error.statusCode);
  }

  async tagImage(source: string, target: string): Promise<void> {
    const [repo, tag] = splitImageTag(target);
    await this.dial(
      { method: "POST", path: `/images/${source}/tag`, query: { repo, tag }, ok: [201], imageCall: true },
      "empty",
    );
  }

  async pushImage(ref: string, options: PushImageOptions = {}): Promise<void> {
    const [name, tag] = splitImageTag(ref);
    const auth = options.auth;
    const response = await this.dial(
      {
        method: "POST",
        path: `/images/${name}/push`,
        query: { tag },
        ok: [200],
        signal: options.signal,
        imageCall: true,
        authconfig: auth
          ? { username: auth.username, password: auth.password, serveraddress: auth.serverAddress }
          : {},
        // Pushing layers takes a while; only the engine answering at all is bounded tightly.
        timeoutMs: Math.max(this.callTimeoutMs, ENGINE_TIMEOUTS_MS.upload),
      },
      "stream",
    );
    // The registry's refusals arrive as {"error": …} messages in the stream.
    for await (const message of this.progress(response, `the progress of pushing ${ref}`)) {
      const progress = message as { status?: string; id?: string; progress?: string; error?: string };
      if (progress.error) throw new EngineError("other", progress.error);
      if (progress.status) {
        const line = [progress.id, progress.status, progress.progress].filter(Boolean).join(" ");
        options.onProgress?.(line.replace(/^(\S+) /, "$1: "));
      }
    }
  }

  async loadImage(tar: Readable): Promise<string[]> {
    const response = await this.dial(
      {
        method: "POST",
        path: "/images/load",
        query: { quiet: true },
        file: tar,
        contentType: "application/x-tar",
        ok: [200],
        // Loading large images takes a while; only the engine answering at all is bounded tightly.
        timeoutMs: Math.max(this.callTimeoutMs, ENGINE_TIMEOUTS_MS.upload),
      },
      "stream",
    );
    const loaded: string[] = [];
    for await (const message of this.progress(response, "the answer to an image load")) {
      const entry = message as { stream?: string; error?: string };
      if (entry.error) throw new EngineError("other", entry.error);
      const match = /^Loaded image(?: ID)?: (.+)$/.exec((entry.stream ?? "").trim());
      if (match && loaded.length < 1000) loaded.push(match[1]!.slice(0, 1000));
    }
    return loaded;
  }

  /**
   * The messages of a progress stream (pull, push, load): lines of at most ENGINE_ANSWER_BYTES.jsonLine,
   * a stream silent for ENGINE_TIMEOUTS_MS.progressIdle or longer than progressTotal is given up.
   */
  private async *progress(response: IncomingMessage, what: string): AsyncGenerator<unknown> {
    try {
      yield* withinTime(jsonLines(response), response, this.progressTimeoutsMs, what);
    } catch (error) {
      if (error instanceof EngineError) throw error;
      throw this.toEngineError(error as RequestError, { method: "GET", path: "", ok: [] }, undefined);
    } finally {
      response.destroy();
    }
  }

  // ---- containers --------------------------------------------------------------------------------

  async createContainer(spec: ContainerSpec): Promise<string> {
    const created = await this.json<{ Id: string }>({
      method: "POST",
      path: "/containers/create",
      query: spec.name ? { name: spec.name } : undefined,
      body: createBody(spec),
      ok: [201],
    });
    return created.Id;
  }

  async startContainer(id: string): Promise<void> {
    await this.dial(
      { method: "POST", path: `/containers/${encodeURIComponent(id)}/start`, ok: [204, 304] },
      "empty",
    );
  }

  async stopContainer(id: string, options: StopContainerOptions = {}): Promise<StopOutcome> {
    const timeoutS = options.timeoutS ?? 10;
    const began = Date.now();
    await this.dial(
      {
        method: "POST",
        path: `/containers/${encodeURIComponent(id)}/stop`,
        query: { t: timeoutS },
        ok: [204, 304],
        // The engine waits up to timeoutS before it kills, so the call may take that long.
        timeoutMs: timeoutS * 1000 + this.callTimeoutMs,
      },
      "empty",
    );
    // Docker does not say whether it had to kill. A stop that ended before the timeout did not;
    // one that took it whole did if the command died of SIGKILL (137) rather than of its signal.
    if (Date.now() - began < timeoutS * 1000) return { killed: false };
    const view = await this.inspectContainer(id);
    return { killed: view?.exitCode === 137 && !view.oomKilled };
  }

  async killContainer(id: string, options: KillContainerOptions = {}): Promise<void> {
    await this.dial(
      {
        method: "POST",
        path: `/containers/${encodeURIComponent(id)}/kill`,
        query: { signal: options.signal ?? "SIGKILL" },
        ok: [204],
      },
      "empty",
    );
  }

  async removeContainer(id: string, options: RemoveContainerOptions = {}): Promise<void> {
    await this.dial(
      {
        method: "DELETE",
        path: `/containers/${encodeURIComponent(id)}`,
        query: { force: options.force ?? false, v: options.removeVolumes ?? false },
        ok: [204],
      },
      "empty",
    );
  }

  async inspectContainer(id: string): Promise<ContainerView | undefined> {
    const info = await this.findContainer(id);
    return info ? containerView(info) : undefined;
  }

  private async findContainer(id: string): Promise<Docker.ContainerInspectInfo | undefined> {
    try {
      return await this.json<Docker.ContainerInspectInfo>({
        method: "GET",
        path: `/containers/${encodeURIComponent(id)}/json`,
        ok: [200],
        limit: ENGINE_ANSWER_BYTES.inspect,
      });
    } catch (error) {
      if (error instanceof EngineError && error.kind === "not_found") return undefined;
      throw error;
    }
  }

  async listContainers(options: ListContainersOptions = {}): Promise<ContainerSummary[]> {
    const labels = Object.entries(options.labels ?? {}).map(([key, value]) => `${key}=${value}`);
    const list = await this.json<Docker.ContainerInfo[]>({
      method: "GET",
      path: "/containers/json",
      query: { all: options.all ?? false, filters: JSON.stringify(labels.length ? { label: labels } : {}) },
      ok: [200],
      limit: ENGINE_ANSWER_BYTES.list,
    });
    if (!Array.isArray(list))
      throw new EngineError(
        "other",
        `engine at ${describeEndpoint(this.endpoint)} answered a list that is not one`,
      );
    return list.map(containerSummary);
  }

  // ---- streams -----------------------------------------------------------------------------------

  async *logs(id: string, options: LogsOptions = {}): AsyncGenerator<LogLine> {
    const info = await this.findContainer(id);
    if (!info) throw new EngineError("not_found", `No such container: ${id}`, 404);
    let response: IncomingMessage;
    try {
      response = await this.dial(
        {
          method: "GET",
          path: `/containers/${encodeURIComponent(id)}/logs`,
          query: {
            stdout: true,
            stderr: true,
            timestamps: true,
            follow: options.follow ?? false,
            tail: options.tail === undefined ? "all" : String(Math.max(0, options.tail)),
          },
          ok: [200],
          signal: options.signal,
        },
        "stream",
      );
    } catch (error) {
      if (options.signal?.aborted) return;
      throw error;
    }
    // With a tty the engine sends raw bytes; otherwise stdout and stderr are multiplexed.
    const frames = info.Config.Tty ? rawFrames(response) : demultiplex(response);
    yield* this.untilAborted(timestampedLines(frames, !info.Config.Tty), options.signal, response);
  }

  /** Ends a stream quietly when the caller aborts, and always releases the HTTP response. */
  private async *untilAborted<T>(
    source: AsyncIterable<T>,
    signal: AbortSignal | undefined,
    response: Readable,
  ): AsyncGenerator<T> {
    try {
      for await (const item of source) yield item;
    } catch (error) {
      if (signal?.aborted) return;
      throw new EngineError("unreachable", `engine stream broke: ${(error as Error).message}`);
    } finally {
      response.destroy();
    }
  }

  async replaceHostEntries(id: string, entries: { remove: string[]; add: string[] }): Promise<void> {
    const session = await this.exec(id, { cmd: hostsCommand(entries) });
    session.end();
    // The script prints only on failure; what it prints is kept up to a bound, the rest read and dropped.
    let output = "";
    for await (const out of session.output) {
      if (output.length < ENGINE_ANSWER_BYTES.commandOutput)
        output += out.data.toString("utf8").slice(0, ENGINE_ANSWER_BYTES.commandOutput - output.length);
    }
    const code = await session.exitCode;
    if (code !== 0)
      throw new EngineError("other", `could not rewrite /etc/hosts (exit code ${code}): ${output.trim()}`);
  }

  async exec(id: string, options: ExecOptions): Promise<ExecSession> {
    const tty = options.tty ?? false;
    const created = await this.json<{ Id: string }>({
      method: "POST",
      path: `/containers/${encodeURIComponent(id)}/exec`,
      body: {
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: tty,
        Cmd: options.cmd,
        Env: options.env ? envToList(options.env) : undefined,
        User: options.user,
        WorkingDir: options.workingDir,
      },
      ok: [201],
    });
    const socket = await this.dial(
      {
        method: "POST",
        path: `/exec/${created.Id}/start`,
        body: { Detach: false, Tty: tty },
        ok: [200, 101],
        signal: options.signal,
      },
      "hijack",
    );
    const abort = () => socket.destroy();
    options.signal?.addEventListener("abort", abort, { once: true });

    // Output is read into a queue as it comes: the exit code is only known after the output has
    // ended, and a caller may look at the exit code before reading the output. Beyond
    // ENGINE_ANSWER_BYTES.execQueue not yet taken, reading waits (the engine is held back by flow
    // control), so output nobody reads is never held without bound.
    const output = new AsyncQueue<ExecOutput>(() => socket.destroy(), {
      max: ENGINE_ANSWER_BYTES.execQueue,
      size: (o) => o.data.length,
    });
    const frames: AsyncIterable<Frame> = tty ? rawFrames(socket) : demultiplex(socket);
    const outputDone = (async () => {
      try {
        for await (const frame of frames) {
          output.push(frame);
          await output.room();
        }
        output.end();
      } catch (error) {
        if (options.signal?.aborted) output.end();
        else output.fail(new EngineError("unreachable", `exec stream broke: ${(error as Error).message}`));
      } finally {
        options.signal?.removeEventListener("abort", abort);
      }
    })();
    const exitCode = outputDone.then(async () => {
      const deadline = Date.now() + EXEC_EXIT_WAIT_MS;
      for (;;) {
        const state = await this.json<{ Running: boolean; ExitCode: number | null }>({
          method: "GET",
          path: `/exec/${created.Id}/json`,
          ok: [200],
        });
        if (!state.Running && state.ExitCode !== null) return state.ExitCode;
        if (Date.now() > deadline) throw execStillRunning(created.Id);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    });
    // Marks the promise handled: a caller that never asks for the exit code must not crash the process.
    exitCode.catch(() => {});
    return {
      write: (data) => {
        socket.write(data);
      },
      // Half-closing the hijacked connection is how the engine learns that stdin has ended.
      end: () => {
        socket.end();
      },
      output,
      exitCode,
      resize: async (size) => {
        if (!tty) return;
        await this.dial(
          {
            method: "POST",
            path: `/exec/${created.Id}/resize`,
            query: { h: size.rows, w: size.cols },
            ok: [200, 201],
          },
          "empty",
        );
      },
    };
  }

  async *events(options: EventsOptions = {}): AsyncGenerator<ContainerEvent> {
    let response: IncomingMessage;
    try {
      response = await this.dial(
        {
          method: "GET",
          path: "/events",
          query: {
            filters: JSON.stringify({ type: ["container"] }),
            // Docker reads fractional seconds with nanoseconds.
            since: options.since === undefined ? undefined : (options.since / 1000).toFixed(9),
          },
          ok: [200],
          signal: options.signal,
        },
        "stream",
      );
    } catch (error) {
      if (options.signal?.aborted) return;
      throw error;
    }
    for await (const message of this.untilAborted(jsonLines(response), options.signal, response)) {
      const event = containerEvent(message as DockerEventMessage);
      if (event) yield event;
    }
  }
}

/** The fields of `GET /info` Berth reads. */
interface DockerInfo {
  ID: string;
  Name: string;
  NCPU: number;
  MemTotal: number;
  DockerRootDir?: string;
  ServerVersion?: string;
  Driver?: string;
  ExecutionDriver?: string;
  OperatingSystem?: string;
}
