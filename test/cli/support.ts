// The CLI's tests run the real `berth` binary as a child process against a real server process
// (the server entry with simulated providers, whose nodes are fake engines).
import { type ChildProcess, execFile, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before } from "node:test";
import { promisify } from "node:util";
import { basic, waitFor } from "../support/harness.ts";

export const ROOT = path.resolve(import.meta.dirname, "../..");
export const BIN = path.join(ROOT, "bin/berth.mjs");
export const ADMIN = { username: "admin", password: "admin-password", key: "cli-test-admin-key-0123456789" };

export interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  env?: Record<string, string | undefined>;
  input?: string;
  cwd?: string;
  /** Kill the command after this long (it then counts as failed). */
  timeoutMs?: number;
}

export async function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, host, () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * `npm pack` of packages/cli into `dir`, installed from the tarball as a user would (offline, into
 * a prefix of its own): the packed files and the installed `berth`.
 */
export async function installPackage(dir: string): Promise<{ files: string[]; prefix: string; bin: string }> {
  const run = promisify(execFile);
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const packed = await run(npm, ["pack", "--pack-destination", dir, "--json"], {
    cwd: path.join(ROOT, "packages/cli"),
  });
  const [info] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
  if (!info) throw new Error(`npm pack said: ${packed.stdout}`);
  const prefix = path.join(dir, "prefix");
  await run(
    npm,
    [
      "install",
      "-g",
      "--prefix",
      prefix,
      "--offline",
      "--no-audit",
      "--no-fund",
      path.join(dir, info.filename),
    ],
    { cwd: dir },
  );
  return { files: info.files.map((f) => f.path).sort(), prefix, bin: path.join(prefix, "bin", "berth") };
}

/** The environment of the CLI with every credential variable of the test runner's own removed. */
export function cleanEnv(extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(BERTH_|DOCKERCLOUD_)/.test(k) || k === "NO_COLOR" || k === "FORCE_COLOR") continue;
    env[k] = v;
  }
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) env[k] = v;
  return env;
}

export class Server {
  readonly url: string;
  readonly configDir: string;
  private constructor(
    readonly port: number,
    readonly proc: ChildProcess,
    readonly dataDir: string,
  ) {
    this.url = `http://127.0.0.1:${port}`;
    this.configDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-cli-home-"));
  }

  static async start(env: Record<string, string> = {}): Promise<Server> {
    const port = await freePort();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-cli-server-"));
    const proc = spawn(process.execPath, ["--import", "tsx", "test/support/server-with-test-kinds.ts"], {
      cwd: ROOT,
      env: cleanEnv({
        BERTH_LISTEN: `127.0.0.1:${port}`,
        BERTH_DATA_DIR: dataDir,
        BERTH_ADMIN_USERNAME: ADMIN.username,
        BERTH_ADMIN_PASSWORD: ADMIN.password,
        BERTH_ADMIN_API_KEY: ADMIN.key,
        BERTH_LOG_LEVEL: "warn",
        BERTH_SIM_DELAY_FACTOR: "0.01",
        BERTH_AUTO_ATTACH_ENGINE: "false",
        BERTH_ACTION_POLL_MS: "100",
        BERTH_RECONCILE_INTERVAL_MS: "300",
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
        BERTH_NODE_HEALTH_INTERVAL_MS: "3600000",
        ...env,
      }),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    proc.stderr?.on("data", (d) => {
      stderr += d;
    });
    // A test file stopped by its timeout skips its after hooks: the server must not outlive it.
    process.once("exit", () => proc.kill("SIGKILL"));
    const server = new Server(port, proc, dataDir);
    await waitFor(
      `server on ${port}`,
      async () => {
        if (proc.exitCode !== null) throw new Error(`server exited: ${stderr}`);
        const res = await fetch(`${server.url}/auth/`, {
          headers: { authorization: basic(ADMIN.username, ADMIN.key) },
        });
        return res.status === 200;
      },
      // A loaded machine may take long to start a TypeScript server.
      180_000,
      100,
    );
    return server;
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode === null) {
      const exited = new Promise((r) => this.proc.once("exit", r));
      this.proc.kill("SIGTERM");
      const timer = setTimeout(() => this.proc.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
    fs.rmSync(this.dataDir, { recursive: true, force: true });
    fs.rmSync(this.configDir, { recursive: true, force: true });
  }

  /** Environment signed in as the admin through variables (no config file). */
  adminEnv(): Record<string, string> {
    return {
      BERTH_URL: this.url,
      BERTH_USER: ADMIN.username,
      BERTH_APIKEY: ADMIN.key,
      BERTH_CONFIG: path.join(this.configDir, "unused.json"),
    };
  }
}

/** Runs `berth <args>` and collects its output and exit code. */
export function berth(args: readonly string[], opts: RunOptions = {}): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: opts.cwd ?? ROOT,
      env: cleanEnv(opts.env ?? {}),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const timer = opts.timeoutMs ? setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs) : undefined;
    child.on("error", reject);
    child.on("close", (code, signal) => {
      if (timer) clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr });
    });
    child.stdin.end(opts.input ?? "");
  });
}

/** Starts `berth <args>` and leaves it running: for follow modes and signals. */
export function spawnBerth(args: readonly string[], opts: RunOptions = {}) {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: opts.cwd ?? ROOT,
    env: cleanEnv(opts.env ?? {}),
    stdio: ["pipe", "pipe", "pipe"],
  });
  const out = { stdout: "", stderr: "" };
  child.stdout.on("data", (d) => {
    out.stdout += d;
  });
  child.stderr.on("data", (d) => {
    out.stderr += d;
  });
  const exited = new Promise<number>((resolve) =>
    child.on("close", (code, signal) => resolve(code ?? (signal ? 128 : 1))),
  );
  return { child, out, exited };
}

/** Table rows of a `ls` output, split on runs of two or more spaces. */
export function rows(stdout: string): string[][] {
  return stdout
    .trimEnd()
    .split("\n")
    .slice(1)
    .map((line) => line.split(/\s{2,}/));
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A call to the server as the admin, bypassing the CLI (to set up or check what it did). */
export async function api(server: Server, method: string, p: string, body?: unknown) {
  const res = await fetch(server.url + p, {
    method,
    headers: { authorization: basic(ADMIN.username, ADMIN.key), "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON.
  return { status: res.status, body: (await res.json()) as any };
}

/** `berth <args>` that must exit 0; the message shows its output otherwise. */
export function okWith(env: () => Record<string, string>) {
  return async (args: string[], opts: RunOptions = {}): Promise<Result> => {
    const r = await berth(args, { env: env(), ...opts });
    if (r.code !== 0) throw new Error(`berth ${args.join(" ")}: exit ${r.code}\n${r.stderr}${r.stdout}`);
    return r;
  };
}

/**
 * The server of a test file: started before its tests, stopped after them. `live.server` and
 * `live.env` (the administrator's credentials) are set once the file's `before` hook ran, after
 * `opts.cluster` (simulated nodes) is deployed; `ok` runs `berth` with that environment and must exit 0.
 */
export function liveServer(
  opts: { env?: Record<string, string>; cluster?: { name: string; nodes: number } } = {},
) {
  const live = { server: undefined as unknown as Server, env: {} as Record<string, string> };
  before(async () => {
    live.server = await Server.start(opts.env);
    live.env = live.server.adminEnv();
    if (opts.cluster) await simulatedCluster(live.server, opts.cluster.name, opts.cluster.nodes);
  });
  after(async () => {
    await live.server?.stop();
  });
  return { live, ok: okWith(() => live.env) };
}

/** Deploys a cluster of simulated nodes (fake engines) as the admin. */
export async function simulatedCluster(server: Server, name: string, nodes: number): Promise<void> {
  const cluster = await api(server, "POST", "/api/infra/v1/nodecluster/", {
    name,
    region: "/api/infra/v1/region/aws/us-east-1/",
    node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
    target_num_nodes: nodes,
  });
  await api(server, "POST", `${cluster.body.resource_uri}deploy/`);
  await waitFor(
    "the simulated cluster deployed",
    async () => (await api(server, "GET", cluster.body.resource_uri)).body.state === "Deployed",
    60_000,
    200,
  );
}

/** Starts the test-only widget operation (an action of `steps` steps); resolves with its uuid. */
export async function widget(
  server: Server,
  body: { steps: number; stepMs: number; failAt?: number },
  id = "w1",
): Promise<string> {
  const r = await api(server, "POST", `/api/app/v1/widget/${id}/work/`, body);
  if (r.status !== 202) throw new Error(`widget: ${r.status}`);
  return r.body.action as string;
}

export async function actionState(server: Server, uuid: string): Promise<string> {
  return (await api(server, "GET", `/api/audit/v1/action/${uuid}/`)).body.state as string;
}
