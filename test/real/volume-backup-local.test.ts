// Volume backups on a real local node (issue 31): a service whose container writes a file into its
// volume is backed up through the API (its container paused while the engine's archive is read),
// and the backup is restored into a new service whose container waits for that file and prints
// it: the same bytes. Berth runs as a process (src/main.ts). Needs root, dockerd, iproute2,
// iptables and busybox-static; skipped locally without them, failing when CI=true.
// Lab range 10.206.0.0/16, bridge berth-bk1 (this file's own).
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { DockerEngine } from "../../src/drivers/docker/docker-engine.ts";
import { BUSYBOX_IMAGE, LocalProvider } from "../../src/drivers/local/index.ts";
import { BerthProcess, type Json } from "../support/berth-process.ts";
import { waitFor } from "../support/harness.ts";
import { localNodesUnavailable } from "../support/local-lab.ts";
import { execIn, uuidOf } from "../support/real-api.ts";

const LAB_RANGE = "10.206.0.0/16";
const BRIDGE = "berth-bk1";
const work = fs.mkdtempSync(path.join(os.tmpdir(), "berth-volume-backup-"));
// The node's remapped root passes through it to the node's data-root (never reads it).
fs.chmodSync(work, 0o711);
const dataDir = path.join(work, "data");

const unavailable = await localNodesUnavailable({ labRange: LAB_RANGE, bridgeName: BRIDGE });

describe("volume backups on a local node", { skip: unavailable ?? false }, () => {
  let berth: BerthProcess | undefined;

  after(async () => {
    await berth?.stop("SIGKILL");
    const local = new LocalProvider({
      stateDir: path.join(dataDir, "local-nodes"),
      labRange: LAB_RANGE,
      bridgeName: BRIDGE,
    });
    for (const n of local.listNodes())
      await local.terminateNode(n.nodeId).catch((error: Error) => console.error(`cleanup: ${error.message}`));
    await local.teardownHost().catch((error: Error) => console.error(`cleanup: ${error.message}`));
    fs.rmSync(work, { recursive: true, force: true });
  });

  test("a file a container wrote comes back, byte for byte, in a new service's container", {
    timeout: 300_000,
  }, async () => {
    berth = await BerthProcess.start(dataDir, {
      BERTH_LOCAL_LAB_RANGE: LAB_RANGE,
      BERTH_LOCAL_BRIDGE: BRIDGE,
    });
    const b = berth;
    const created = await b.api("POST", "/api/infra/v1/nodecluster/", {
      name: "volumes",
      region: "/api/infra/v1/region/local/host/",
      node_type: "/api/infra/v1/nodetype/local/standard/",
      target_num_nodes: 1,
    });
    assert.equal(created.status, 201, created.raw);
    const deploy = await b.api("POST", `${created.body.resource_uri}deploy/`);
    const deployed = await b.finished(deploy.headers.get("x-platform-action-uri")!, 180_000);
    assert.equal(deployed.state, "Success", await b.logs([deployed.uuid]));
    const node = await b.get((await b.get(created.body.resource_uri)).nodes[0]);
    const engine = new DockerEngine({ endpoint: `tcp://${node.public_ip}:2375` });

    const running = async (body: Record<string, unknown>): Promise<Json> => {
      const made = await b.api("POST", "/api/app/v1/service/", { image: BUSYBOX_IMAGE, ...body });
      assert.equal(made.status, 201, made.raw);
      const started = await b.api("POST", `${made.body.resource_uri}start/`);
      const action = await b.finished(started.headers.get("x-platform-action-uri")!);
      assert.equal(action.state, "Success", await b.logs([action.uuid]));
      const service = await b.get(made.body.resource_uri);
      const container = await b.get(service.containers[0]);
      const inspected = await engine.listContainers({
        all: true,
        labels: { "io.berth.container": container.uuid },
      });
      return { ...service, engineId: inspected[0]!.id };
    };
    const od = async (id: string) => {
      const r = await execIn(engine, id, ["od", "-An", "-tx1", "/data/hello.bin"], 10_000);
      assert.equal(r.exitCode, 0, r.output);
      return r.output;
    };

    // printf's octal escapes write any byte.
    const writer = await running({
      name: "writer",
      bindings: [{ container_path: "/data" }],
      run_command: `sh -c "printf 'hello from the volume\\n\\001\\377\\200end' > /data/hello.bin; sleep 100000"`,
    });
    await waitFor(
      "the file written",
      async () =>
        (await execIn(engine, writer.engineId, ["ls", "/data"], 10_000)).output.includes("hello.bin"),
      30_000,
      200,
    );
    const written = await od(writer.engineId);
    assert.match(written, /68 65 6c 6c 6f/);

    const backup = await b.api("POST", `${writer.resource_uri}volumebackup/`, { keep: 3 });
    assert.equal(backup.status, 202, backup.raw);
    const backupAction = await b.finished(backup.headers.get("x-platform-action-uri")!);
    const backupLog = await b.logs([backupAction.uuid]);
    assert.equal(backupAction.state, "Success", backupLog);
    assert.match(backupLog, /Backed up \/data of writer-1 \(\d+ bytes\)/);
    const made = await b.get(backup.body.resource_uri);
    assert.equal(made.state, "Success");
    assert.ok(made.size_bytes > 0);
    // The writer was paused only while it was read: the same container runs on.
    assert.equal((await engine.inspectContainer(writer.engineId))?.state, "running");

    const reader = await running({
      name: "reader",
      bindings: [{ container_path: "/data" }],
      run_command: `sh -c "while [ ! -f /data/hello.bin ]; do sleep 0.2; done; sleep 0.5; od -An -tx1 /data/hello.bin; sleep 100000"`,
    });
    const restore = await b.api("POST", `${made.resource_uri}restore/`, { service: reader.resource_uri });
    assert.equal(restore.status, 202, restore.raw);
    const restoreAction = await b.finished(restore.headers.get("x-platform-action-uri")!);
    assert.equal(restoreAction.state, "Success", await b.logs([restoreAction.uuid]));
    assert.equal(await od(reader.engineId), written, "the same bytes");
    // The reader's own process found the file and printed the same bytes.
    await waitFor(
      "the reader to print the bytes",
      async () => {
        let text = "";
        for await (const line of engine.logs(reader.engineId, { follow: false })) text += line.line;
        return text.replace(/\s+/g, " ").trim() === written.replace(/\s+/g, " ").trim();
      },
      30_000,
      500,
    );
    assert.equal(uuidOf(made.service), uuidOf(writer.resource_uri));
    await b.stop();
  });
});
