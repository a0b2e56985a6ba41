#!/usr/bin/env node
// Runs every test file (test/**/*.test.ts, src/**/*.test.ts) with Node's test runner through tsx.
// `--fast` skips the real-engine tier (files under test/real/ and test/local/, and docker driver tests)
// and the replica tier (test/replicas/: several server processes on PostgreSQL and a real engine).
// Browser files (test/web/) run in a tier of their own, one at a time (two Chromiums at once on a
// 2-core machine make each other's timings meaningless); the real-engine tier runs beside the
// PostgreSQL tier.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const fast = process.argv.includes("--fast");
const only = process.argv.slice(2).filter((a) => !a.startsWith("--"));

function walk(dir) {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === "node_modules" ? [] : walk(p);
    return e.name.endsWith(".test.ts") ? [p] : [];
  });
}

let files = [...walk(path.join(root, "test")), ...walk(path.join(root, "src"))].sort();
if (fast) files = files.filter((f) => !/\/test\/(real|local|replicas)\/|docker-engine\.test\.ts$/.test(f));
if (only.length) files = files.filter((f) => only.some((o) => f.includes(o)));

// Real-engine files start several Docker engines each: on a 2-core machine two of them at once
// starve each other's engines, so they run one at a time after the fast files (two at a time).
const isReal = (f) => /\/test\/(real|local|replicas)\/|docker-engine\.test\.ts$/.test(f);
// The tiers that go through the API and the store run a second time on PostgreSQL when a server is
// named (CI names one): behaviour must be the same on both dialects. Pure tiers and the store suite
// (which runs on both dialects itself) run once.
const pgUrl = process.env.BERTH_TEST_PG_URL;
const isBrowser = (f) => /\/test\/web\//.test(f);
const usesDatabase = (f) =>
  !isReal(f) &&
  !isBrowser(f) &&
  !/\/test\/(domain|scheduler|drivers|store|cli|process|replicas|ops)\//.test(f);
const tiers = [
  {
    name: "fast tiers (SQLite)",
    files: files.filter((f) => !isReal(f) && !isBrowser(f)),
    concurrency: 2,
    stage: 1,
  },
  ...(pgUrl
    ? [
        {
          name: "API tiers on PostgreSQL",
          files: files.filter(usesDatabase),
          concurrency: 2,
          stage: 2,
          env: { BERTH_TEST_DATABASE_URL: pgUrl },
        },
      ]
    : []),
  // The real-engine tier runs one file at a time beside the PostgreSQL tier (stage 2): it mostly
  // waits on containers and engines. Its output is held and printed when it ends, so that the two
  // never interleave. The browser tier runs alone (stage 3): Chromium aborts its requests
  // (ERR_NETWORK_CHANGED) whenever the real-engine tier adds or removes a network interface.
  { name: "real-engine tier", files: files.filter(isReal), concurrency: 1, stage: 2, held: true },
  { name: "browser tier", files: files.filter(isBrowser), concurrency: 1, stage: 3 },
].filter((t) => t.files.length > 0);
const sequential = process.env.BERTH_TEST_SEQUENTIAL === "true";

let status = 0;
// The failures of every tier are printed again at the very end, so that the tail of a long run (all a
// CI log may keep) names every failing test and its error. Each tier's output is copied as it comes
// (a file reporter would lose its end to --test-force-exit).
const failures = [];
/** Runs one tier's files in one `node --test` process; resolves once it has ended. */
async function runTier(tier) {
  const log = (text) => (tier.held && !sequential ? held.push(text) : process.stdout.write(text));
  const held = [];
  log(`\n### ${tier.name}: ${tier.files.length} files\n\n`);
  const started = Date.now();
  const child = spawn(
    process.execPath,
    // A file whose tests finished but left a handle open must not hang the run (--test-force-exit);
    // no single test may run for more than 5 minutes (--test-timeout).
    [
      "--import",
      "tsx",
      "--test",
      `--test-concurrency=${tier.concurrency}`,
      "--test-force-exit",
      "--test-timeout=300000",
      "--test-reporter=spec",
      ...tier.files,
    ],
    {
      stdio: ["inherit", "pipe", "inherit"],
      cwd: root,
      env: { ...process.env, BERTH_LOG_LEVEL: process.env.BERTH_LOG_LEVEL ?? "silent", ...tier.env },
    },
  );
  let output = "";
  child.stdout.on("data", (chunk) => {
    log(chunk);
    output += chunk;
  });
  const [code, signal] = await new Promise((resolve) => child.on("close", (c, s) => resolve([c, s])));
  log(`\n### ${tier.name}: ended in ${Math.round((Date.now() - started) / 1000)} s\n`);
  if (held.length) process.stdout.write(`\n### output of ${tier.name}, held while it ran\n${held.join("")}`);
  if (code !== 0) {
    status = code ?? 1;
    const at = output.lastIndexOf("failing tests:");
    failures.push(
      `### ${tier.name}: exit ${code ?? signal}\n` +
        (at >= 0 ? output.slice(at) : "(no failing test reported: the run itself failed)\n"),
    );
  }
}

// Tiers of one stage run at the same time (unless BERTH_TEST_SEQUENTIAL=true); stages one after another.
const stages = [...new Set(tiers.map((t) => t.stage))].sort();
for (const stage of stages) {
  const group = tiers.filter((t) => t.stage === stage);
  if (sequential) for (const tier of group) await runTier(tier);
  else await Promise.all(group.map(runTier));
}
if (failures.length) console.log(`\n### failures of this run, again\n\n${failures.join("\n")}`);
process.exit(status);
