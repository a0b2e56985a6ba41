// The script the Docker driver runs in a container to make its link host entries follow
// (drivers/docker/hosts.ts), run here by the host's POSIX shell on a copy of a Docker-written
// /etc/hosts: the entries given at create and those of an earlier rewrite go, the new ones come,
// everything else stays, and the arguments are data (no shell injection from a host name).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { hostsCommand } from "../../src/drivers/docker/hosts.ts";

function run(file: string, entries: { remove: string[]; add: string[] }): string {
  const [, , script, ...args] = hostsCommand(entries);
  const r = spawnSync("/bin/sh", ["-c", script!.replaceAll("/etc/hosts", file), ...args], {
    encoding: "utf8",
  });
  assert.equal(r.status, 0, r.stderr);
  return fs.readFileSync(file, "utf8");
}

describe("the hosts rewrite script", () => {
  test("replaces the link entries and keeps the rest, twice in a row", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-hosts-"));
    const file = path.join(dir, "hosts");
    // As Docker writes it: defaults, extra hosts (`ip<TAB>host`), the container's own name.
    fs.writeFileSync(
      file,
      "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n10.1.0.5\tapi.example\n10.0.0.2\tweb\n10.0.0.2\tweb-1\n10.0.0.9\tlb-1\n",
    );
    const first = run(file, {
      remove: ["web:10.0.0.2", "web-1:10.0.0.2"],
      add: ["web:10.0.0.2", "web-1:10.0.0.2", "api:10.0.0.3", "api-1:10.0.0.3"],
    });
    assert.equal(
      first,
      "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n10.1.0.5\tapi.example\n10.0.0.9\tlb-1\n" +
        "10.0.0.2\tweb\t# berth-link\n10.0.0.2\tweb-1\t# berth-link\n10.0.0.3\tapi\t# berth-link\n10.0.0.3\tapi-1\t# berth-link\n",
    );
    const second = run(file, {
      remove: ["web:10.0.0.2", "web-1:10.0.0.2", "api:10.0.0.3", "api-1:10.0.0.3"],
      add: ["web:10.0.0.4", "web-1:10.0.0.4", "x$(touch pwned):10.0.0.7"],
    });
    assert.equal(
      second,
      "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n10.1.0.5\tapi.example\n10.0.0.9\tlb-1\n" +
        "10.0.0.4\tweb\t# berth-link\n10.0.0.4\tweb-1\t# berth-link\n10.0.0.7\tx$(touch pwned)\t# berth-link\n",
    );
    assert.ok(!fs.existsSync(path.join(process.cwd(), "pwned")), "arguments are never run");
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
