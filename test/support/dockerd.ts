// A private Docker engine for tests: its own data root, exec root, socket, config file and bridge, so it
// never touches (or is touched by) another dockerd on the machine. Nothing it does leaves the machine:
// its bridge subnet is guarded by an `unreachable` route, forwarding and masquerading stay off, and
// published ports listen on 127.0.0.1 only. It stops only the processes it started, by their PIDs.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { createServer as createHttpServer } from "node:http";
import { createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import Docker from "dockerode";
import type { DockerTls } from "../../src/drivers/docker/index.ts";

const run = promisify(execFile);

const DOCKERD_PATHS = ["/usr/sbin/dockerd", "/usr/bin/dockerd", "/usr/local/bin/dockerd"];
const BUSYBOX_PATHS = ["/usr/bin/busybox", "/bin/busybox"];
const PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

export const TEST_IMAGE = "busybox:local";

const findFirst = (paths: string[]) => paths.find((path) => existsSync(path));

/** Why a private dockerd cannot run here, or undefined when it can. */
export function dockerdUnavailable(): string | undefined {
  if (process.platform !== "linux") return `private dockerd needs Linux, this is ${process.platform}`;
  if (process.getuid?.() !== 0) return "private dockerd needs root (the test process is not root)";
  if (!findFirst(DOCKERD_PATHS)) return `dockerd not found (looked in ${DOCKERD_PATHS.join(", ")})`;
  if (!findFirst(BUSYBOX_PATHS)) return "static busybox not found (apt-get install busybox-static)";
  for (const tool of ["/usr/sbin/ip", "/usr/bin/tar"]) {
    const alt = tool.replace("/usr", "");
    if (!existsSync(tool) && !existsSync(alt)) return `${tool} not found`;
  }
  return undefined;
}

export interface PrivateDockerd {
  socketPath: string;
  /** The engine's TCP listener on 127.0.0.1, with mutual TLS when openssl is available. */
  tcp: { address: string; tls: DockerTls | undefined };
  image: string;
  dir: string;
  pid: number;
  /** The container subnet, for example "172.31.231.0/24". */
  subnet: string;
  stop(): Promise<void>;
}

async function freeLoopbackPort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (!address || typeof address === "string") throw new Error("no loopback port");
  return address.port;
}

/** A /24 in 172.31.200-254 that nothing on this host uses yet. */
export async function pickSubnet(): Promise<string> {
  const { stdout: addresses } = await run("ip", ["-4", "-o", "addr", "show"], { env: { PATH } });
  const { stdout: routes } = await run("ip", ["-4", "route", "show", "table", "all"], { env: { PATH } });
  const used = addresses + routes;
  const start = 200 + (randomBytes(1)[0]! % 55);
  for (let i = 0; i < 55; i += 1) {
    const octet = 200 + ((start - 200 + i) % 55);
    if (!used.includes(`172.31.${octet}.`)) return `172.31.${octet}`;
  }
  throw new Error("no free 172.31.x.0/24 for a test bridge");
}

async function makeCertificates(dir: string): Promise<DockerTls | undefined> {
  if (!existsSync("/usr/bin/openssl")) return undefined;
  const o = (args: string[]) => run("/usr/bin/openssl", args, { cwd: dir, env: { PATH } });
  const days = ["-days", "2"];
  await o([
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    ...days,
    "-subj",
    "/CN=berth-test-ca",
    "-keyout",
    "ca-key.pem",
    "-out",
    "ca.pem",
  ]);
  for (const [name, extension] of [
    ["server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth"],
    ["client", "extendedKeyUsage=clientAuth"],
  ] as const) {
    await writeFile(join(dir, `${name}.ext`), `${extension}\n`);
    await o([
      "req",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-subj",
      `/CN=berth-test-${name}`,
      "-keyout",
      `${name}-key.pem`,
      "-out",
      `${name}.csr`,
    ]);
    await o([
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca-key.pem",
      "-CAcreateserial",
      ...days,
      "-extfile",
      `${name}.ext`,
      "-out",
      `${name}.pem`,
    ]);
  }
  const read = (file: string) => readFile(join(dir, file), "utf8");
  return { ca: await read("ca.pem"), cert: await read("client.pem"), key: await read("client-key.pem") };
}

/** Folder with bin/busybox, one symlink per applet, etc/passwd, tmp (1777) and /var/www/index.html. */
export async function buildRootfs(root: string): Promise<void> {
  const busybox = findFirst(BUSYBOX_PATHS)!;
  await mkdir(join(root, "bin"), { recursive: true });
  await mkdir(join(root, "etc"), { recursive: true });
  await mkdir(join(root, "tmp"), { recursive: true });
  await mkdir(join(root, "var/www"), { recursive: true });
  await mkdir(join(root, "root"), { recursive: true });
  await copyFile(busybox, join(root, "bin/busybox"));
  await chmod(join(root, "bin/busybox"), 0o755);
  const { stdout } = await run(busybox, ["--list"]);
  for (const applet of stdout.split("\n").map((line) => line.trim())) {
    if (applet && applet !== "busybox" && !applet.includes("/"))
      await symlink("busybox", join(root, "bin", applet));
  }
  await chmod(join(root, "tmp"), 0o1777);
  await writeFile(
    join(root, "etc/passwd"),
    "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
  );
  await writeFile(join(root, "etc/group"), "root:x:0:\nnogroup:x:65534:\n");
  await writeFile(join(root, "var/www/index.html"), "hello from busybox\n");
}

export async function importImage(docker: Docker, root: string, ref: string): Promise<void> {
  const tar = spawn("tar", ["-C", root, "-c", "."], { env: { PATH }, stdio: ["ignore", "pipe", "inherit"] });
  const [repo, tag] = ref.split(":");
  const progress = await docker.importImage(tar.stdout, { repo, tag, changes: ['CMD ["sh"]'] });
  await new Promise<void>((resolve, reject) => {
    docker.modem.followProgress(progress, (error: Error | null, output: Array<{ error?: string }>) => {
      const failed = output?.find((entry) => entry.error);
      if (error || failed) reject(error ?? new Error(failed?.error));
      else resolve();
    });
  });
}

export const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

export async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

/** A process we started, still ours: its command line names our private directory. */
export function oursStill(pid: number, dir: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(dir);
  } catch {
    return false;
  }
}

/** `tls: false` gives a plain TCP listener even where openssl exists (benchmarks compare raw transports). */
export async function startPrivateDockerd(opts: { tls?: boolean } = {}): Promise<PrivateDockerd> {
  const reason = dockerdUnavailable();
  if (reason) throw new Error(reason);
  const dir = await mkdtemp(join(tmpdir(), "berth-dockerd-"));
  const bridge = `brt-${randomBytes(3).toString("hex")}`;
  const undo: Array<() => Promise<unknown>> = [];
  const ip = (args: string[]) => run("ip", args, { env: { PATH } });

  const stop = async () => {
    for (const step of undo.splice(0).reverse()) await step().catch(() => {});
  };

  try {
    undo.push(() => rm(dir, { recursive: true, force: true }));
    const prefix = await pickSubnet();
    const subnet = `${prefix}.0/24`;
    // Guard first: an address of this subnet that no interface holds is refused here, never routed out.
    await ip(["route", "add", "unreachable", subnet, "metric", "4242"]);
    undo.push(() => ip(["route", "del", "unreachable", subnet, "metric", "4242"]));
    await ip(["link", "add", bridge, "type", "bridge"]);
    undo.push(() => ip(["link", "del", bridge]));
    await ip(["addr", "add", `${prefix}.1/24`, "dev", bridge]);
    await ip(["link", "set", bridge, "up"]);

    const socketPath = join(dir, "docker.sock");
    const tcpPort = await freeLoopbackPort();
    const tls = opts.tls === false ? undefined : await makeCertificates(dir);
    // Our own daemon.json keeps /etc/docker/daemon.json out, and its own key gives this engine its own id.
    await writeFile(
      join(dir, "daemon.json"),
      JSON.stringify({ "deprecated-key-path": join(dir, "key.json") }),
    );
    const args = [
      "--data-root",
      join(dir, "data"),
      "--exec-root",
      join(dir, "exec"),
      "--pidfile",
      join(dir, "docker.pid"),
      "--config-file",
      join(dir, "daemon.json"),
      "--host",
      `unix://${socketPath}`,
      "--host",
      `tcp://127.0.0.1:${tcpPort}`,
      "--bridge",
      bridge,
      "--ip",
      "127.0.0.1",
      "--iptables=false",
      "--ip-forward=false",
      "--ip-masq=false",
      "--userland-proxy=true",
      ...(tls
        ? [
            "--tlsverify",
            "--tlscacert",
            join(dir, "ca.pem"),
            "--tlscert",
            join(dir, "server.pem"),
            "--tlskey",
            join(dir, "server-key.pem"),
          ]
        : ["--tls=false"]),
    ];
    const { pid } = await superviseDockerd({
      command: findFirst(DOCKERD_PATHS)!,
      args,
      dir,
      socketPath,
      undo,
    });

    return {
      socketPath,
      tcp: { address: `tcp://127.0.0.1:${tcpPort}`, tls },
      image: TEST_IMAGE,
      dir,
      pid,
      subnet,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * Starts a dockerd we own (`command args`, logging to `dir`/dockerd.log) and waits until it answers on
 * `socketPath`, with the busybox test image imported. Its teardown goes on `undo`: containers first
 * (a `sleep` PID 1 would make a graceful engine stop wait 10 s for each), then dockerd and its
 * containerd by PID (only while their command line still names `dir`), then any mount a crash left.
 */
export async function superviseDockerd(opts: {
  command: string;
  args: string[];
  dir: string;
  socketPath: string;
  undo: Array<() => Promise<unknown>>;
}): Promise<{ pid: number; docker: Docker }> {
  const { dir, undo } = opts;
  const log = openSync(join(dir, "dockerd.log"), "a");
  const child: ChildProcess = spawn(opts.command, opts.args, { env: { PATH }, stdio: ["ignore", log, log] });
  closeSync(log);
  const pid = child.pid;
  if (pid === undefined) throw new Error("dockerd did not start");
  let exited = false;
  child.once("exit", () => {
    exited = true;
  });
  // If the test process dies without running its hooks, at least ask dockerd to shut down.
  const onExit = () => {
    if (alive(pid)) process.kill(pid, "SIGTERM");
  };
  process.on("exit", onExit);
  const docker = new Docker({ socketPath: opts.socketPath });
  undo.push(async () => {
    process.off("exit", onExit);
    if (!exited) {
      const containers = await docker.listContainers({ all: true }).catch(() => []);
      await Promise.all(
        containers.map((c) =>
          docker
            .getContainer(c.Id)
            .remove({ force: true })
            .catch(() => {}),
        ),
      );
    }
    const containerdPid = Number(
      await readFile(join(dir, "exec/containerd/containerd.pid"), "utf8").catch(() => ""),
    );
    if (alive(pid) && oursStill(pid, dir)) process.kill(pid, "SIGTERM");
    if (!(await waitForExit(pid, 20_000)) && oursStill(pid, dir)) process.kill(pid, "SIGKILL");
    await waitForExit(pid, 5_000);
    if (containerdPid > 0 && alive(containerdPid) && oursStill(containerdPid, dir)) {
      process.kill(containerdPid, "SIGTERM");
      if (!(await waitForExit(containerdPid, 5_000))) process.kill(containerdPid, "SIGKILL");
    }
    // dockerd unmounts on a clean stop; after a crash its mounts could remain under our folder.
    const mounts = readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .map((line) => line.split(" ")[4] ?? "")
      .filter((mountPoint) => mountPoint.startsWith(`${dir}/`))
      .reverse();
    for (const mountPoint of mounts)
      await run("umount", ["-l", mountPoint], { env: { PATH } }).catch(() => {});
  });

  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited) throw new Error(`dockerd exited at start:\n${tail(join(dir, "dockerd.log"))}`);
    const ok = await docker.ping().then(
      () => true,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline)
      throw new Error(`dockerd did not answer in 30 s:\n${tail(join(dir, "dockerd.log"))}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  const root = join(dir, "rootfs");
  await mkdir(root, { recursive: true });
  await buildRootfs(root);
  await importImage(docker, root, TEST_IMAGE);
  await rm(root, { recursive: true, force: true });
  return { pid, docker };
}

export function tail(path: string): string {
  try {
    return readFileSync(path, "utf8").split("\n").slice(-30).join("\n");
  } catch {
    return "(no log)";
  }
}

/**
 * A registry on 127.0.0.1 that has no images: it answers the API check and "manifest unknown" to
 * everything else, so a pull fails the way a real registry fails, without leaving the machine.
 */
export async function startEmptyRegistry(): Promise<{ address: string; close(): Promise<void> }> {
  const server = createHttpServer((request, response) => {
    const headers = { "content-type": "application/json", "docker-distribution-api-version": "registry/2.0" };
    if (request.url === "/v2/" || request.url === "/v2") {
      response.writeHead(200, headers).end("{}");
      return;
    }
    const body = { errors: [{ code: "MANIFEST_UNKNOWN", message: "manifest unknown", detail: {} }] };
    response.writeHead(404, headers).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("registry did not listen");
  return {
    address: `127.0.0.1:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
