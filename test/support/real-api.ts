// Helpers shared by the real-engine tier: commands run inside engine containers, URIs taken apart,
// free loopback ports, and typed GETs through the API that fail the test on anything but 200.
import assert from "node:assert/strict";
import { createServer } from "node:net";
import type { Engine } from "../../src/drivers/engine.ts";
import { type Caller, call, type Harness, waitFor } from "./harness.ts";

/** The last segment of a resource URI: the object's uuid. */
export const uuidOf = (uri: string): string => uri.split("/").filter(Boolean).at(-1)!;

/** The uuid of the action a response's `X-Platform-Action-URI` header names. */
export function actionUuidOf(headers: Record<string, unknown> | Headers): string {
  const value =
    headers instanceof Headers ? headers.get("x-platform-action-uri") : headers["x-platform-action-uri"];
  assert.equal(typeof value, "string", "the response names its action");
  return uuidOf(value as string);
}

/** A port nothing listens on right now, on 127.0.0.1. */
export async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (!address || typeof address === "string") throw new Error("no free port");
  return address.port;
}

/** A GET through the API as `who` that fails the test unless the answer is 200. */
export function getter(h: Harness, who: Caller): <T>(uri: string) => Promise<T> {
  return async <T>(uri: string): Promise<T> => {
    const res = await call(h, who, "GET", uri);
    assert.equal(res.status, 200, res.raw);
    return res.body as T;
  };
}

/** Runs a command in a container and collects its output; gives up (and aborts) after `timeoutMs`. */
export async function execIn(
  engine: Engine,
  containerId: string,
  cmd: string[],
  timeoutMs: number,
): Promise<{ exitCode: number; output: string }> {
  const abort = new AbortController();
  const timer = setTimeout(
    () => abort.abort(new Error(`${cmd.join(" ")}: no answer in ${timeoutMs} ms`)),
    timeoutMs,
  );
  try {
    const session = await engine.exec(containerId, { cmd, signal: abort.signal });
    session.end();
    const chunks: Buffer[] = [];
    for await (const out of session.output) chunks.push(out.data);
    if (abort.signal.aborted) throw abort.signal.reason;
    return { exitCode: await session.exitCode, output: Buffer.concat(chunks).toString("utf8") };
  } finally {
    clearTimeout(timer);
  }
}

/** Waits for the action a response names to end (Success, Failed or Canceled); answers it with its log. */
export async function finishedAction(
  h: Harness,
  who: Caller,
  res: { headers: Record<string, unknown> | Headers },
  timeoutMs = 60_000,
): Promise<{ uuid: string; state: string; log: string[] }> {
  const uuid = actionUuidOf(res.headers);
  const get = getter(h, who);
  const action = await waitFor(
    `action ${uuid} to end`,
    async () => {
      const a = await get<{ uuid: string; state: string }>(`/api/audit/v1/action/${uuid}/`);
      return ["Success", "Failed", "Canceled"].includes(a.state) ? a : undefined;
    },
    timeoutMs,
    100,
  );
  const log = (await h.store.actions.actionLogTail(uuid, 500)).map((l) => l.line);
  return { uuid, state: action.state, log };
}
