// The Engine implementation for real Docker engines, over the Engine API through dockerode's modem.
// Every call goes through one request primitive, so each has a timeout (an unreachable engine fails
// fast instead of hanging an action) and every failure becomes a typed EngineError.
import { statfs } from "node:fs/promises";
import type { Agent as HttpAgent, IncomingMessage } from "node:http";
import type { Duplex, Readable } from "node:stream";
import Docker from "dockerode";
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
import { demultiplex, type Frame, jsonLines, rawFrames, timestampedLines } from "./streams.ts";

export interface DockerEngineOptions {
  /** A parsed endpoint, or an address such as `unix:///var/run/docker.sock` or `tcp://10.0.0.5:2376`. */
  endpoint: DockerEndpoint | string;
  /** TLS material for a TCP address given as a string. */
  tls?: DockerTls;
  /** Longest wait for an ordinary call; streams only wait this long for the engine to answer. */
  callTimeoutMs?: number;
  pingTimeoutMs?: number;
  /**
   * Makes the connections instead of TCP (an agent's reverse tunnel: drivers/tunnel). The
   * endpoint's host and port then only name the engine in messages.
   */
  agent?: HttpAgent;
}

type QueryValue = string | number | boolean | string[] | undefined;

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
}

/** Error shape docker-modem produces for an HTTP status it was not told to accept. */
interface ModemHttpError extends Error {
  statusCode?: number;
  json?: unknown;
  code?: string;
}

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
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
]);

/** Docker's wording when a registry has no such image (pull) or the engine has none (create). */
const IMAGE_MISSING =
  /no such image|manifest unknown|not found|repository does not exist|pull access denied|name unknown/i;

/** docker-modem prefixes "(HTTP code 404) no such container - "; users should see the engine's words. */
function engineMessage(error: ModemHttpError): string {
  const json = error.json;
  if (json && typeof json === "object" && "message" in json && typeof json.message === "string")
    return json.message;
  return error.message.replace(/^\(HTTP code \d+\) [^-]*- /, "").trim();
}

function isAbortError(error: unknown): boolean {
  return (
    error instanceof Error && (error.name === "AbortError" || (error as ModemHttpError).code === "ABORT_ERR")
  );
}

export class DockerEngine implements Engine {
  readonly endpoint: DockerEndpoint;
  private readonly docker: Docker;
  private readonly callTimeoutMs: number;
  private readonly pingTimeoutMs: number;

  constructor(options: DockerEngineOptions) {
    this.endpoint =
      typeof options.endpoint === "string"
        ? parseDockerEndpoint(options.endpoint, options.tls)
        : options.endpoint;
    this.callTimeoutMs = options.callTimeoutMs ?? 30_000;
    this.pingTimeoutMs = options.pingTimeoutMs ?? 3_000;
    if ("socketPath" in this.endpoint) {
      this.docker = new Docker({ socketPath: this.endpoint.socketPath });
    } else if (this.endpoint.tls) {
      const { ca, cert, key } = this.endpoint.tls;
      this.docker = new Docker({
        host: this.endpoint.host,
        port: this.endpoint.port,
        protocol: "https",
        ca,
        cert,
        key,
      });
    } else {
      this.docker = new Docker({
        host: this.endpoint.host,
        port: this.endpoint.port,
        protocol: "http",
        ...(options.agent ? { agent: options.agent } : {}),
      });
    }
  }

  // ---- the request primitive ------------------------------------------------------------------

  /**
   * One Engine API call. The timeout covers the whole call for ordinary requests, and only the wait
   * for the response headers for streams, which then live until the caller's signal or the engine ends them.
   */
  private dial(call: Call, mode: "json"): Promise<unknown>;
  private dial(call: Call, mode: "stream"): Promise<IncomingMessage>;
  private dial(call: Call, mode: "hijack"): Promise<Duplex>;
  private dial(call: Call, mode: "json" | "stream" | "hijack"): Promise<unknown> {
    const timeoutMs = call.timeoutMs ?? this.callTimeoutMs;
    const timer = new AbortController();
    const signal = call.signal ? AbortSignal.any([call.signal, timer.signal]) : timer.signal;
    let timedOut = false;
    const handle = setTimeout(() => {
      timedOut = true;
      timer.abort(new Error("timeout"));
    }, timeoutMs);
    const statusCodes: Record<number, boolean> = {};
    for (const status of call.ok) statusCodes[status] = true;
    const headers: Record<string, string> = {};
    if (call.contentType) headers["Content-Type"] = call.contentType;
    return new Promise<unknown>((resolve, reject) => {
      this.docker.modem.dial(
        {
          path: call.query ? `${call.path}?` : call.path,
          method: call.method,
          // _query and _body keep query parameters out of POST bodies and vice versa.
          options: { _query: call.query ?? {}, _body: call.body ?? {} },
          file: call.file,
          headers: call.contentType ? headers : undefined,
          authconfig: call.authconfig,
          isStream: mode !== "json",
          hijack: mode === "hijack",
          openStdin: mode === "hijack",
          statusCodes,
          abortSignal: signal,
        },
        (error, result) => {
          clearTimeout(handle);
          if (!error) {
            resolve(result);
            return;
          }
          if (call.signal?.aborted && !timedOut) {
            reject(call.signal.reason ?? error);
            return;
          }
          reject(this.toEngineError(error as ModemHttpError, call, timedOut ? timeoutMs : undefined));
        },
      );
    });
  }

  private toEngineError(error: ModemHttpError, call: Call, timedOutAfterMs: number | undefined): EngineError {
    const where = describeEndpoint(this.endpoint);
    if (timedOutAfterMs !== undefined) {
      return new EngineError("unreachable", `engine at ${where} did not answer within ${timedOutAfterMs} ms`);
    }
    const status = error.statusCode;
    if (status === undefined) {
      if (
        (error.code && NETWORK_CODES.has(error.code)) ||
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
    await this.dial({ method: "GET", path: "/_ping", ok: [200], timeoutMs: this.pingTimeoutMs }, "json");
  }

  async info(): Promise<EngineInfo> {
    const [info, version] = await Promise.all([
      this.json<DockerInfo>({ method: "GET", path: "/info", ok: [200] }),
      this.json<{ ApiVersion?: string; Version?: string }>({ method: "GET", path: "/version", ok: [200] }),
    ]);
    return {
      id: info.ID,
      name: info.Name,
      cpus: info.NCPU,
      memoryMb: Math.floor(info.MemTotal / (1024 * 1024)),
      diskGb: await this.diskGb(info.DockerRootDir),
      engineVersion: info.ServerVersion ?? version.Version ?? "",
      apiVersion: version.ApiVersion ?? "",
      storageDriver: info.Driver ?? "",
      execDriver: info.ExecutionDriver || "native",
      operatingSystem: info.OperatingSystem ?? "",
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
    for await (const message of jsonLines(response)) {
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
      "json",
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
        timeoutMs: Math.max(this.callTimeoutMs, 600_000),
      },
      "stream",
    );
    // The registry's refusals arrive as {"error": …} messages in the stream.
    for await (const message of jsonLines(response)) {
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
        timeoutMs: Math.max(this.callTimeoutMs, 600_000),
      },
      "stream",
    );
    const loaded: string[] = [];
    for await (const message of jsonLines(response)) {
      const entry = message as { stream?: string; error?: string };
      if (entry.error) throw new EngineError("other", entry.error);
      const match = /^Loaded image(?: ID)?: (.+)$/.exec((entry.stream ?? "").trim());
      if (match) loaded.push(match[1]!);
    }
    return loaded;
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
      "json",
    );
  }

  async stopContainer(id: string, options: StopContainerOptions = {}): Promise<void> {
    const timeoutS = options.timeoutS ?? 10;
    await this.dial(
      {
        method: "POST",
        path: `/containers/${encodeURIComponent(id)}/stop`,
        query: { t: timeoutS },
        ok: [204, 304],
        // The engine waits up to timeoutS before it kills, so the call may take that long.
        timeoutMs: timeoutS * 1000 + this.callTimeoutMs,
      },
      "json",
    );
  }

  async killContainer(id: string, options: KillContainerOptions = {}): Promise<void> {
    await this.dial(
      {
        method: "POST",
        path: `/containers/${encodeURIComponent(id)}/kill`,
        query: { signal: options.signal ?? "SIGKILL" },
        ok: [204],
      },
      "json",
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
      "json",
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
    });
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
    let text = "";
    for await (const out of session.output) text += out.data.toString("utf8");
    const code = await session.exitCode;
    if (code !== 0)
      throw new EngineError("other", `could not rewrite /etc/hosts (exit code ${code}): ${text.trim()}`);
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

    // Output is read at once into a queue: the exit code is only known after the output has ended,
    // and a caller may look at the exit code before (or without) reading the output.
    const output = new AsyncQueue<ExecOutput>(() => socket.destroy());
    const frames: AsyncIterable<Frame> = tty ? rawFrames(socket) : demultiplex(socket);
    const outputDone = (async () => {
      try {
        for await (const frame of frames) output.push(frame);
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
          "json",
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
