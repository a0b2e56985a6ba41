// The engine side of user-namespace remapping, without an engine: the remap user and its
// subordinate ranges are provisioned once and never twice, ranges never overlap the host's, the
// directories down to a data-root are made passable only where they are Berth's, the node's
// daemon.json names the remap user, and the containers a remapping engine runs only in the host's
// user namespace ask for it.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { createBody, needsHostUserNamespace } from "../../src/drivers/docker/mapping.ts";
import type { CommandRunner, RunOptions } from "../../src/drivers/local/commands.ts";
import { daemonConfig } from "../../src/drivers/local/engine.ts";
import type { NodeRecord } from "../../src/drivers/local/state.ts";
import {
  ensureRemapUser,
  ensureTraversable,
  planRemapStart,
  REMAP_USER,
  RemapUnavailable,
} from "../../src/drivers/local/userns.ts";

const dir = mkdtempSync(path.join(tmpdir(), "berth-userns-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Answers `getent passwd` as if the user did not exist until `useradd` ran; records every command. */
function fakeHost(): CommandRunner & { ran: RunOptions[] } {
  let exists = false;
  const ran: RunOptions[] = [];
  return {
    ran,
    async run(options) {
      ran.push(options);
      if (path.basename(options.file) === "useradd") exists = true;
      if (path.basename(options.file) === "getent")
        return exists
          ? { exitCode: 0, stdout: `${REMAP_USER}:x:999:995::/nonexistent:/usr/sbin/nologin\n`, stderr: "" }
          : { exitCode: 2, stdout: "", stderr: "" };
      return { exitCode: 0, stdout: "", stderr: "" };
    },
    async spawnDetached() {
      throw new Error("not here");
    },
  };
}

describe("the remap user and its ranges", () => {
  test("a range starts at 100000 or past every range of either file, aligned on 65536", () => {
    assert.equal(planRemapStart([]), 131_072);
    assert.equal(planRemapStart([{ name: "alice", start: 100_000, count: 65_536 }]), 196_608);
    assert.equal(planRemapStart([{ name: "dockremap", start: 231_072, count: 65_536 }]), 327_680);
    assert.throws(
      () => planRemapStart([{ name: "all", start: 100_000, count: 2 ** 32 - 200_000 }]),
      RemapUnavailable,
    );
  });

  test("provisioned once: useradd as an argument list, one line in each file, after the others", async () => {
    const files = { subuid: path.join(dir, "subuid"), subgid: path.join(dir, "subgid") };
    writeFileSync(files.subuid, "alice:100000:65536"); // no final newline
    writeFileSync(files.subgid, "alice:100000:65536\nbob:165536:65536\n");
    const host = fakeHost();
    const log: string[] = [];
    const range = await ensureRemapUser({ commands: host, log: (l) => log.push(l), files });
    assert.deepEqual(range, { user: REMAP_USER, uid: 262_144, gid: 262_144, count: 65_536 });
    assert.equal(readFileSync(files.subuid, "utf8"), "alice:100000:65536\nberth-remap:262144:65536\n");
    assert.equal(
      readFileSync(files.subgid, "utf8"),
      "alice:100000:65536\nbob:165536:65536\nberth-remap:262144:65536\n",
    );
    const useradd = host.ran.filter((r) => path.basename(r.file) === "useradd");
    assert.equal(useradd.length, 1);
    assert.deepEqual(useradd[0]!.args.slice(0, 2), ["--system", "--user-group"]);
    assert.equal(useradd[0]!.args.at(-1), REMAP_USER);
    assert.ok(!useradd[0]!.args.some((a) => a.includes(":")), "nothing useradd refuses");

    // Again: nothing is added, the same range is answered.
    const again = await ensureRemapUser({ commands: host, log: (l) => log.push(l), files });
    assert.deepEqual(again, range);
    assert.equal(host.ran.filter((r) => path.basename(r.file) === "useradd").length, 1);
    assert.equal(readFileSync(files.subuid, "utf8").match(/berth-remap/g)?.length, 1);
  });
});

describe("directories down to a data-root", () => {
  test("Berth's own directories become passable (o+x, never readable); others are named, not changed", () => {
    const outside = path.join(dir, "outside");
    const owned = path.join(outside, "data");
    const dataRoot = path.join(owned, "local-nodes", "nodes", "n1", "data");
    mkdirSync(dataRoot, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o711); // mkdtemp's 0700 would stop the walk above the test's directories
    chmodSync(outside, 0o755);
    const changed = ensureTraversable(dataRoot, owned);
    assert.deepEqual(
      changed.sort(),
      [
        owned,
        path.join(owned, "local-nodes"),
        path.join(owned, "local-nodes", "nodes"),
        path.join(owned, "local-nodes", "nodes", "n1"),
      ].sort(),
    );
    for (const d of changed) assert.equal((statSync(d).mode & 0o777).toString(8), "701", d);

    chmodSync(outside, 0o700);
    assert.throws(
      () => ensureTraversable(dataRoot, owned),
      (err: Error) => {
        assert.ok(err instanceof RemapUnavailable);
        assert.match(
          err.message,
          new RegExp(`${outside} does not let other users pass through it \\(o\\+x\\)`),
        );
        return true;
      },
    );
    assert.equal(
      (statSync(outside).mode & 0o777).toString(8),
      "700",
      "a directory above Berth's is left as it is",
    );
  });
});

describe("engine settings", () => {
  test("a remapped node's daemon.json names the remap user; an older record's does not", () => {
    const record = { keyFilePath: "/k", cgroupPath: "/berth-x" } as NodeRecord;
    assert.equal(daemonConfig(record)["userns-remap"], undefined);
    const remapped = {
      ...record,
      usernsRemap: { user: REMAP_USER, uid: 131_072, gid: 131_072, count: 65_536 },
    };
    assert.equal(daemonConfig(remapped)["userns-remap"], REMAP_USER);
  });

  test("privileged and host network or PID containers stay in the host's user namespace; others do not", () => {
    const base = { image: "busybox:local" };
    for (const spec of [{ privileged: true }, { networkMode: "host" }, { pidMode: "host" }]) {
      assert.ok(needsHostUserNamespace({ ...base, ...spec }));
      assert.equal(createBody({ ...base, ...spec }).HostConfig?.UsernsMode, "host", JSON.stringify(spec));
    }
    for (const spec of [{}, { networkMode: "bridge" }, { privileged: false }, { binds: ["/:/host"] }]) {
      assert.equal(createBody({ ...base, ...spec }).HostConfig?.UsernsMode, undefined, JSON.stringify(spec));
    }
  });
});
