// A server that cannot use its database says which database (without its password), which
// variable chose it and what to change, in one line, and exits 1 (issue 27: it said only
// `berth: connect ECONNREFUSED 127.0.0.1:50521`). Runs `src/main.ts` as `npm start` does.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

const root = path.resolve(import.meta.dirname, "../..");
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "berth-dberr-"));
fs.chmodSync(scratch, 0o755);
const pgUrl = process.env.BERTH_TEST_PG_URL;

after(() => fs.rmSync(scratch, { recursive: true, force: true }));

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Starts the server with these variables; resolves with its exit code and output once it exits. */
function start(
  env: Record<string, string>,
  opts: { uid?: number } = {},
): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const base: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("BERTH_")) base[k] = v;
  const proc = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: root,
    env: {
      ...base,
      BERTH_LISTEN: "127.0.0.1:0",
      BERTH_LOG_LEVEL: "warn",
      BERTH_AUTO_ATTACH_ENGINE: "false",
      BERTH_DATA_DIR: path.join(scratch, "data"),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
    ...(opts.uid === undefined ? {} : { uid: opts.uid, gid: opts.uid }),
  });
  let stderr = "";
  let stdout = "";
  proc.stderr.on("data", (d) => (stderr += d));
  proc.stdout.on("data", (d) => (stdout += d));
  const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
  return new Promise((resolve) =>
    proc.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, stdout });
    }),
  );
}

/** One line on stderr, exit status 1. */
function assertOneLine(r: { code: number | null; stderr: string }): string {
  assert.equal(r.code, 1, r.stderr);
  const lines = r.stderr.trimEnd().split("\n");
  assert.equal(lines.length, 1, `one line, no stack:\n${r.stderr}`);
  return lines[0]!;
}

/**
 * A PostgreSQL server's refusal of a connection, as it is sent on the wire (an ErrorResponse to the
 * startup message), for machines without a server to refuse a password or a database.
 */
function refusingPostgres(code: string, message: string): Promise<{ port: number; close(): void }> {
  const field = (type: string, value: string) =>
    Buffer.concat([Buffer.from(type), Buffer.from(`${value}\0`)]);
  const fields = Buffer.concat([
    field("S", "FATAL"),
    field("V", "FATAL"),
    field("C", code),
    field("M", message),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(5);
  head.write("E", 0);
  head.writeInt32BE(4 + fields.length, 1);
  const server = net.createServer((socket) => {
    socket.once("data", () => socket.end(Buffer.concat([head, fields])));
    socket.on("error", () => undefined);
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({ port: (server.address() as net.AddressInfo).port, close: () => server.close() }),
    ),
  );
}

describe("a database Berth cannot use at start", () => {
  test("a closed port: the URL without its password, the variable, connection refused", async () => {
    const port = await freePort();
    const url = `postgres://berth:s3cret-pw@127.0.0.1:${port}/berth`;
    const line = assertOneLine(await start({ BERTH_DATABASE_URL: url }));
    assert.ok(!line.includes("s3cret-pw"), line);
    assert.equal(
      line,
      `berth: cannot use the database postgres://berth:***@127.0.0.1:${port}/berth (set by BERTH_DATABASE_URL): ` +
        `connection refused at 127.0.0.1:${port}: no PostgreSQL server listens there. ` +
        "To fix: start PostgreSQL there, or fix the host and port in BERTH_DATABASE_URL.",
    );
  });

  test("a refused password and an unknown database name the user and the database", async () => {
    const cases: { url: (port: number) => string; refusal: [string, string]; expect: RegExp }[] = [
      {
        url: (port) => `postgres://berth:wrong-pw@127.0.0.1:${port}/berth`,
        refusal: ["28P01", 'password authentication failed for user "berth"'],
        expect:
          /^berth: cannot use the database postgres:\/\/berth:\*\*\*@127\.0\.0\.1:\d+\/berth \(set by BERTH_DATABASE_URL\): PostgreSQL at 127\.0\.0\.1:\d+ refused user "berth": password authentication failed for user "berth"\. To fix: fix the user name or password in BERTH_DATABASE_URL/,
      },
      {
        url: (port) => `postgres://berth:pw@127.0.0.1:${port}/no_such_db`,
        refusal: ["3D000", 'database "no_such_db" does not exist'],
        expect:
          /^berth: cannot use the database postgres:\/\/berth:\*\*\*@127\.0\.0\.1:\d+\/no_such_db \(set by BERTH_DATABASE_URL\): PostgreSQL at 127\.0\.0\.1:\d+ has no database "no_such_db"\. To fix: create it \(createdb no_such_db\) or name an existing one in BERTH_DATABASE_URL\.$/,
      },
    ];
    for (const c of cases) {
      const server = await refusingPostgres(...c.refusal);
      try {
        const line = assertOneLine(await start({ BERTH_DATABASE_URL: c.url(server.port) }));
        assert.match(line, c.expect);
        assert.ok(!line.includes("wrong-pw"));
      } finally {
        server.close();
      }
    }
  });

  test("the same against a real PostgreSQL server", {
    skip: !pgUrl && "BERTH_TEST_PG_URL is not set",
  }, async () => {
    const wrongPassword = new URL(pgUrl!);
    wrongPassword.password = "not-the-password";
    const refused = assertOneLine(await start({ BERTH_DATABASE_URL: wrongPassword.toString() }));
    assert.match(
      refused,
      /\(set by BERTH_DATABASE_URL\): PostgreSQL at .* refused user ".*": password authentication failed/,
    );
    assert.ok(!refused.includes("not-the-password"));
    const unknown = new URL(pgUrl!);
    unknown.pathname = "/berth_no_such_database";
    assert.match(
      assertOneLine(await start({ BERTH_DATABASE_URL: unknown.toString() })),
      /has no database "berth_no_such_database"\. To fix: create it/,
    );
  });

  test("a SQLite data folder that cannot be created names BERTH_DATA_DIR", async () => {
    const file = path.join(scratch, "a-file");
    fs.writeFileSync(file, "");
    const line = assertOneLine(await start({ BERTH_DATA_DIR: path.join(file, "data") }));
    assert.equal(
      line,
      `berth: cannot use the database sqlite:${file}/data/berth.sqlite (the SQLite file in BERTH_DATA_DIR): ` +
        `cannot create the folder ${file}/data: a part of its path is a file, not a folder. ` +
        "To fix: move that file away, or set BERTH_DATA_DIR (or BERTH_DATABASE_URL) to a folder this user can write.",
    );
  });

  test("a SQLite folder this user cannot write names the folder and the variable", async () => {
    // As root every folder is writable: the server then runs as nobody (65534).
    const folder = path.join(scratch, "read-only");
    fs.mkdirSync(folder, { mode: 0o555 });
    fs.chmodSync(folder, 0o555);
    const asRoot = process.getuid?.() === 0;
    const r = await start(
      { BERTH_DATABASE_URL: `sqlite:${folder}/berth.sqlite`, HOME: scratch },
      asRoot ? { uid: 65534 } : {},
    );
    const line = assertOneLine(r);
    assert.match(
      line,
      new RegExp(
        `^berth: cannot use the database sqlite:${folder}/berth\\.sqlite \\(set by BERTH_DATABASE_URL\\): cannot create ${folder}/berth\\.sqlite: the folder ${folder} is not writable by this user \\(uid \\d+\\)\\. To fix: make ${folder} writable by this user, or set BERTH_DATABASE_URL to a file in a folder this user can write\\.$`,
      ),
    );
  });
});
