// Sign-in without a timing oracle (issue 14 item 5): a wrong password for an existing user and
// any password for an unknown user take the same time, on the accounts API (Basic) and on
// POST /oauth/token. Both are checked statistically: samples of the two cases are interleaved,
// and the Mann–Whitney statistic says how often an unknown-user sample is faster than a
// known-user one. Indistinguishable cases give about 0.5; before the fix (an unknown user cost no
// scrypt check: ~2 ms against ~35 ms) every unknown-user sample was faster, which gives 1.0.
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { after, before, test } from "node:test";
import { basic, createUser, type Harness, startHarness } from "../support/harness.ts";
import { requestToken } from "./support.ts";

let h: Harness;

before(async () => {
  h = await startHarness({
    // Many deliberate failures from one address: the lockout must not cut the samples short.
    env: { BERTH_LOGIN_MAX_FAILURES_PER_USER: "100000", BERTH_LOGIN_MAX_FAILURES_PER_ADDRESS: "100000" },
  });
  await createUser(h, "alice");
});

after(async () => {
  await h.close();
});

const SAMPLES = 30;

/**
 * The probability that a sample of `a` is smaller than a sample of `b` (ties count half): the
 * Mann–Whitney U statistic divided by the number of pairs.
 */
function probabilityFaster(a: number[], b: number[]): number {
  let wins = 0;
  for (const x of a) for (const y of b) wins += x < y ? 1 : x === y ? 0.5 : 0;
  return wins / (a.length * b.length);
}

/**
 * The standard error of that probability when both samples come from one distribution; the test
 * allows 4 of them either side of 0.5 (a false alarm about once in 15,000 runs).
 */
function allowedDeviation(n: number, m: number): number {
  return 4 * Math.sqrt((n + m + 1) / (12 * n * m));
}

async function timed(fn: () => Promise<number>, expectStatus: number): Promise<number> {
  const start = performance.now();
  const status = await fn();
  const ms = performance.now() - start;
  assert.equal(status, expectStatus);
  return ms;
}

async function compare(
  label: string,
  known: () => Promise<number>,
  unknown: () => Promise<number>,
  status: number,
): Promise<void> {
  // Warm both paths (the dummy hash is made on first use).
  await known();
  await unknown();
  const k: number[] = [];
  const u: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    // Interleaved, so load on the machine falls on both alike.
    if (i % 2 === 0) {
      k.push(await timed(known, status));
      u.push(await timed(unknown, status));
    } else {
      u.push(await timed(unknown, status));
      k.push(await timed(known, status));
    }
  }
  const p = probabilityFaster(u, k);
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  const d = allowedDeviation(u.length, k.length);
  assert.ok(
    Math.abs(p - 0.5) <= d,
    `${label}: an unknown user is faster than a known one with probability ${p.toFixed(2)} ` +
      `(allowed 0.5 ± ${d.toFixed(2)}); medians known ${median(k).toFixed(1)} ms, unknown ${median(u).toFixed(1)} ms`,
  );
}

test("Basic sign-in on the accounts API: unknown users cost the same as known ones", async () => {
  const profile = (username: string) => async () =>
    (
      await h.app.inject({
        method: "GET",
        url: `/api/v1.1/users/${username}/`,
        headers: { authorization: basic(username, "not-the-password") },
      })
    ).statusCode;
  await compare("accounts Basic", profile("alice"), profile("nobody-here"), 401);
});

test("POST /oauth/token: unknown users cost the same as known ones", async () => {
  const token = (username: string) => async () =>
    (
      await requestToken(h, {
        grant_type: "password",
        username,
        password: "not-the-password",
        scope: "profile_read",
      })
    ).status;
  await compare("oauth token", token("alice"), token("nobody-here"), 400);
});
