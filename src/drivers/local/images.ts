// busybox:local and other images every new local node starts with. Registries may be out of
// reach, so the image is built from the host's static busybox: imported once into the first
// engine, saved from it to a cached archive, and loaded from that archive everywhere else so the
// image id is the same on every node.
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import type Dockerode from "dockerode";
import { CommandError, type CommandRunner } from "./commands.ts";

export const BUSYBOX_IMAGE = "busybox:local";

const INDEX_HTML = `<!doctype html>
<html><head><title>busybox:local</title></head>
<body><p>Served by busybox httpd in Berth's busybox:local image.</p></body></html>
`;

async function fileSha256(file: string): Promise<string> {
  const hash = createHash("sha256");
  await pipeline(createReadStream(file), hash);
  return hash.digest("hex");
}

/** Reads a progress stream of JSON lines to its end; throws on the first reported error. */
export async function drainProgress(stream: NodeJS.ReadableStream): Promise<string[]> {
  let text = "";
  for await (const chunk of stream)
    text += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
  const messages: string[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const message = JSON.parse(line) as { error?: string; status?: string; stream?: string };
    if (message.error) throw new Error(message.error);
    const note = message.status ?? message.stream;
    if (note) messages.push(note.trim());
  }
  return messages;
}

async function hasImage(docker: Dockerode, name: string): Promise<boolean> {
  try {
    await docker.getImage(name).inspect();
    return true;
  } catch {
    return false;
  }
}

export async function loadArchive(docker: Dockerode, archivePath: string): Promise<string[]> {
  return drainProgress(await docker.loadImage(archivePath));
}

function buildRootfs(options: { busybox: string; rootfs: string; applets: string[] }): void {
  const { rootfs } = options;
  rmSync(rootfs, { recursive: true, force: true });
  for (const dir of ["bin", "etc", "root", "tmp", "var/www"]) {
    mkdirSync(path.join(rootfs, dir), { recursive: true });
  }
  copyFileSync(options.busybox, path.join(rootfs, "bin/busybox"));
  chmodSync(path.join(rootfs, "bin/busybox"), 0o755);
  for (const applet of options.applets) {
    if (applet === "busybox" || !/^[\w.[-]+$/.test(applet)) continue;
    symlinkSync("busybox", path.join(rootfs, "bin", applet));
  }
  writeFileSync(
    path.join(rootfs, "etc/passwd"),
    "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
  );
  writeFileSync(path.join(rootfs, "etc/group"), "root:x:0:\nnogroup:x:65534:\n");
  writeFileSync(path.join(rootfs, "var/www/index.html"), INDEX_HTML);
  // mkdir applies the umask; the sticky world-writable mode must be set explicitly.
  chmodSync(path.join(rootfs, "tmp"), 0o1777);
  chmodSync(path.join(rootfs, "root"), 0o700);
}

/**
 * Makes sure `busybox:local` is in the engine. The first call builds it in this engine and
 * saves the archive; later calls (any engine) load the archive. Callers serialize calls.
 */
export async function ensureBusyboxImage(options: {
  docker: Dockerode;
  commands: CommandRunner;
  busybox: string;
  tar: string;
  imagesDir: string;
  log: (line: string) => void;
}): Promise<void> {
  const { docker, commands, imagesDir, log } = options;
  if (await hasImage(docker, BUSYBOX_IMAGE)) return;
  // Keyed by the busybox binary, so an upgraded busybox-static gives a fresh image.
  const digest = (await fileSha256(options.busybox)).slice(0, 12);
  const archive = path.join(imagesDir, `busybox-local-${digest}.tar`);
  if (existsSync(archive)) {
    await loadArchive(docker, archive);
    return;
  }
  mkdirSync(imagesDir, { recursive: true, mode: 0o700 });
  const list = await commands.run({ file: options.busybox, args: ["--list"] });
  if (list.exitCode !== 0) throw new CommandError(`${options.busybox} --list`, list);
  const rootfs = path.join(imagesDir, `busybox-rootfs-${digest}`);
  const rootfsTar = `${rootfs}.tar`;
  try {
    buildRootfs({ busybox: options.busybox, rootfs, applets: list.stdout.split("\n").filter(Boolean) });
    const tarred = await commands.run({
      file: options.tar,
      args: ["-C", rootfs, "--numeric-owner", "--owner=0", "--group=0", "-cf", rootfsTar, "."],
    });
    if (tarred.exitCode !== 0) throw new CommandError("tar", tarred);
    log(`importing ${BUSYBOX_IMAGE} from ${options.busybox}`);
    await drainProgress(
      await docker.importImage(rootfsTar, {
        repo: "busybox",
        tag: "local",
        // WORKDIR makes a plain `httpd -f -p 80` serve /var/www/index.html.
        changes: [
          'CMD ["sh"]',
          "WORKDIR /var/www",
          "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ],
      }),
    );
    const partial = `${archive}.partial`;
    await pipeline(await docker.getImage(BUSYBOX_IMAGE).get(), createWriteStream(partial, { mode: 0o600 }));
    renameSync(partial, archive);
    log(`saved ${BUSYBOX_IMAGE} to ${archive}`);
  } finally {
    rmSync(rootfs, { recursive: true, force: true });
    rmSync(rootfsTar, { force: true });
  }
}
