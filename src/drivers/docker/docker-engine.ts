// The Engine implementation for real Docker engines, over the Engine API (dockerode's types; the
// requests are sent by ./request.ts). Every call goes through one request primitive, so each has a
// timeout (an unreachable engine fails fast instead of hanging an action), every answer is read
// within the bounds of drivers/bounds.ts (a node that answers without end costs Berth a bounded
// amount of memory and time, never the process) and every failure becomes a typed EngineError.
// The calls are grouped by concern: the request primitive in transport.ts, images in images.ts,
// exec sessions in exec.ts; this class holds the engine, container and stream calls.
import { statfs } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import type { Readable } from "node:stream";
import type Docker from "dockerode";
import { boundedBytes, ENGINE_ANSWER_BYTES, ENGINE_TIMEOUTS_MS, VOLUME_ARCHIVE } from "../bounds.ts";
import {
  type ContainerEvent,
  type ContainerSpec,
  type ContainerSummary,
  type ContainerView,
  type Engine,
  EngineError,
  type EngineInfo,
  type EventsOptions,
  type ExecOptions,
  type ExecSession,
  type KillContainerOptions,
  type ListContainersOptions,
  type LogLine,
  type LogsOptions,
  type PullImageOptions,
  type PushImageOptions,
  type RemoveContainerOptions,
  type StopContainerOptions,
  type StopOutcome,
} from "../engine.ts";
import type {} from "../engine-files.ts";
import type { ContainerStats } from "../engine-stats.ts";
import { type DockerEndpoint, describeEndpoint } from "./endpoint.ts";
import { exec, replaceHostEntries } from "./exec.ts";
import { imageId, loadImage, pullImage, pushImage, tagImage } from "./images.ts";
import {
  containerEvent,
  containerSummary,
  containerView,
  createBody,
  type DockerEventMessage,
} from "./mapping.ts";
import { containerStats } from "./stats.ts";
import { demultiplex, jsonLines, rawFrames, timestampedLines } from "./streams.ts";
import { type DockerEngineOptions, DockerTransport, untilAborted } from "./transport.ts";

export type { DockerEngineOptions } from "./transport.ts";

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
  private readonly transport: DockerTransport;

  constructor(options: DockerEngineOptions) {
    this.transport = new DockerTransport(options);
    this.endpoint = this.transport.endpoint;
  }

  // ---- engine ------------------------------------------------------------------------------------

  async ping(): Promise<void> {
    await this.transport.dial(
      { method: "GET", path: "/_ping", ok: [200], timeoutMs: this.transport.pingTimeoutMs },
      "empty",
    );
  }

  async info(options: { signal?: AbortSignal } = {}): Promise<EngineInfo> {
    const { signal } = options;
    const [answer, versionAnswer] = await Promise.all([
      this.transport.json<unknown>({ method: "GET", path: "/info", ok: [200], signal }),
      this.transport.json<unknown>({ method: "GET", path: "/version", ok: [200], signal }),
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

  // ---- images (images.ts) ------------------------------------------------------------------------

  imageId(ref: string): Promise<string | undefined> {
    return imageId(this.transport, ref);
  }

  async hasImage(ref: string): Promise<boolean> {
    return (await this.imageId(ref)) !== undefined;
  }

  pullImage(ref: string, options: PullImageOptions = {}): Promise<void> {
    return pullImage(this.transport, ref, options);
  }

  tagImage(source: string, target: string): Promise<void> {
    return tagImage(this.transport, source, target);
  }

  pushImage(ref: string, options: PushImageOptions = {}): Promise<void> {
    return pushImage(this.transport, ref, options);
  }

  loadImage(tar: Readable): Promise<string[]> {
    return loadImage(this.transport, tar);
  }

  async createContainer(spec: ContainerSpec): Promise<string> {
    const created = await this.transport.json<{ Id: string }>({
      method: "POST",
      path: "/containers/create",
      query: spec.name ? { name: spec.name } : undefined,
      body: createBody(spec),
      ok: [201],
    });
    return created.Id;
  }

  async startContainer(id: string): Promise<void> {
    await this.transport.dial(
      { method: "POST", path: `/containers/${encodeURIComponent(id)}/start`, ok: [204, 304] },
      "empty",
    );
  }

  async stopContainer(id: string, options: StopContainerOptions = {}): Promise<StopOutcome> {
    const timeoutS = options.timeoutS ?? 10;
    const began = Date.now();
    await this.transport.dial(
      {
        method: "POST",
        path: `/containers/${encodeURIComponent(id)}/stop`,
        query: { t: timeoutS },
        ok: [204, 304],
        // The engine waits up to timeoutS before it kills, so the call may take that long.
        timeoutMs: timeoutS * 1000 + this.transport.callTimeoutMs,
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
    await this.transport.dial(
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
    await this.transport.dial(
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
      return await this.transport.json<Docker.ContainerInspectInfo>({
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
    const list = await this.transport.json<Docker.ContainerInfo[]>({
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

  /** One-shot stats (API 1.41+): the engine answers at once instead of waiting for a second sample. */
  async containerStats(
    id: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<ContainerStats | undefined> {
    try {
      const answer = await this.transport.json<unknown>({
        method: "GET",
        path: `/containers/${encodeURIComponent(id)}/stats`,
        query: { stream: false, "one-shot": true },
        ok: [200],
        limit: ENGINE_ANSWER_BYTES.stats,
        timeoutMs: ENGINE_TIMEOUTS_MS.stats,
        signal: options.signal,
      });
      return containerStats(answer);
    } catch (error) {
      if (error instanceof EngineError && error.kind === "not_found") return undefined;
      throw error;
    }
  }

  // ---- streams -----------------------------------------------------------------------------------

  async *logs(id: string, options: LogsOptions = {}): AsyncGenerator<LogLine> {
    const info = await this.findContainer(id);
    if (!info) throw new EngineError("not_found", `No such container: ${id}`, 404);
    let response: IncomingMessage;
    try {
      response = await this.transport.dial(
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
    yield* untilAborted(timestampedLines(frames, !info.Config.Tty), options.signal, response);
  }
  // ---- commands in containers (exec.ts) ----------------------------------------------------------

  replaceHostEntries(id: string, entries: { remove: string[]; add: string[] }): Promise<void> {
    return replaceHostEntries(this.transport, id, entries);
  }

  async readArchive(id: string, path: string): Promise<Readable> {
    const body = await this.transport.dial(
      { method: "GET", path: `/containers/${encodeURIComponent(id)}/archive`, query: { path }, ok: [200] },
      "stream",
    );
    return boundedBytes(body, VOLUME_ARCHIVE, `the archive of ${path} in container ${id.slice(0, 12)}`);
  }

  async writeArchive(id: string, path: string, tar: Readable): Promise<void> {
    await this.transport.dial(
      {
        method: "PUT",
        path: `/containers/${encodeURIComponent(id)}/archive`,
        query: { path },
        file: tar,
        contentType: "application/x-tar",
        ok: [200],
        timeoutMs: VOLUME_ARCHIVE.totalMs,
      },
      "empty",
    );
  }

  async pauseContainer(id: string): Promise<void> {
    await this.transport.dial(
      { method: "POST", path: `/containers/${encodeURIComponent(id)}/pause`, ok: [204] },
      "empty",
    );
  }

  async unpauseContainer(id: string): Promise<void> {
    await this.transport.dial(
      { method: "POST", path: `/containers/${encodeURIComponent(id)}/unpause`, ok: [204] },
      "empty",
    );
  }

  exec(id: string, options: ExecOptions): Promise<ExecSession> {
    return exec(this.transport, id, options);
  }

  async *events(options: EventsOptions = {}): AsyncGenerator<ContainerEvent> {
    let response: IncomingMessage;
    try {
      response = await this.transport.dial(
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
    for await (const message of untilAborted(jsonLines(response), options.signal, response)) {
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
