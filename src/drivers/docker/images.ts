// The image calls of the Docker driver (inspect, pull, tag, push, load), sent through the
// transport's request primitive; DockerEngine delegates to them.
import type { IncomingMessage } from "node:http";
import type { Readable } from "node:stream";
import { ENGINE_TIMEOUTS_MS } from "../bounds.ts";
import {
  EngineError,
  normalizeImageRef,
  type PullImageOptions,
  type PushImageOptions,
  splitImageTag,
} from "../engine.ts";
import type { DockerTransport } from "./transport.ts";

/** Docker's wording when a registry has no such image (pull) or the engine has none (create). */
const IMAGE_MISSING =
  /no such image|manifest unknown|not found|repository does not exist|pull access denied|name unknown/i;

export async function imageId(t: DockerTransport, ref: string): Promise<string | undefined> {
  try {
    const image = await t.json<{ Id: string }>({
      method: "GET",
      path: `/images/${ref}/json`,
      ok: [200],
      imageCall: true,
    });
    return image.Id;
  } catch (error) {
    if (error instanceof EngineError && error.kind === "image_not_found") return undefined;
    throw error;
  }
}

export async function pullImage(
  t: DockerTransport,
  ref: string,
  options: PullImageOptions = {},
): Promise<void> {
  const auth = options.auth;
  let response: IncomingMessage;
  try {
    response = await t.dial(
      {
        method: "POST",
        path: "/images/create",
        // The tag travels inside fromImage; an empty `tag` would make Docker pull every tag.
        query: { fromImage: normalizeImageRef(ref) },
        ok: [200],
        signal: options.signal,
        imageCall: true,
        authconfig: auth
          ? { username: auth.username, password: auth.password, serveraddress: auth.serverAddress }
          : undefined,
      },
      "stream",
    );
  } catch (error) {
    throw pullError(error);
  }
  // Failures after the engine started answering arrive as {"error": …} messages in the stream.
  for await (const message of t.progress(response, `the progress of pulling ${ref}`)) {
    const progress = message as { status?: string; id?: string; progress?: string; error?: string };
    if (progress.error) throw pullError(new EngineError("other", progress.error));
    if (progress.status) {
      const line = [progress.id, progress.status, progress.progress].filter(Boolean).join(" ");
      options.onProgress?.(line.replace(/^(\S+) /, "$1: "));
    }
  }
}

/** A registry that has no such image answers in several ways; they all mean image_not_found. */
function pullError(error: unknown): unknown {
  if (!(error instanceof EngineError) || error.kind === "unreachable") return error;
  if (error.statusCode === 404 || IMAGE_MISSING.test(error.message)) {
    return new EngineError("image_not_found", error.message, error.statusCode);
  }
  return new EngineError("other", error.message, error.statusCode);
}

export async function tagImage(t: DockerTransport, source: string, target: string): Promise<void> {
  const [repo, tag] = splitImageTag(target);
  await t.dial(
    { method: "POST", path: `/images/${source}/tag`, query: { repo, tag }, ok: [201], imageCall: true },
    "empty",
  );
}

export async function pushImage(
  t: DockerTransport,
  ref: string,
  options: PushImageOptions = {},
): Promise<void> {
  const [name, tag] = splitImageTag(ref);
  const auth = options.auth;
  const response = await t.dial(
    {
      method: "POST",
      path: `/images/${name}/push`,
      query: { tag },
      ok: [200],
      signal: options.signal,
      imageCall: true,
      authconfig: auth
        ? { username: auth.username, password: auth.password, serveraddress: auth.serverAddress }
        : {},
      // Pushing layers takes a while; only the engine answering at all is bounded tightly.
      timeoutMs: Math.max(t.callTimeoutMs, ENGINE_TIMEOUTS_MS.upload),
    },
    "stream",
  );
  // The registry's refusals arrive as {"error": …} messages in the stream.
  for await (const message of t.progress(response, `the progress of pushing ${ref}`)) {
    const progress = message as { status?: string; id?: string; progress?: string; error?: string };
    if (progress.error) throw new EngineError("other", progress.error);
    if (progress.status) {
      const line = [progress.id, progress.status, progress.progress].filter(Boolean).join(" ");
      options.onProgress?.(line.replace(/^(\S+) /, "$1: "));
    }
  }
}

export async function loadImage(t: DockerTransport, tar: Readable): Promise<string[]> {
  const response = await t.dial(
    {
      method: "POST",
      path: "/images/load",
      query: { quiet: true },
      file: tar,
      contentType: "application/x-tar",
      ok: [200],
      // Loading large images takes a while; only the engine answering at all is bounded tightly.
      timeoutMs: Math.max(t.callTimeoutMs, ENGINE_TIMEOUTS_MS.upload),
    },
    "stream",
  );
  const loaded: string[] = [];
  for await (const message of t.progress(response, "the answer to an image load")) {
    const entry = message as { stream?: string; error?: string };
    if (entry.error) throw new EngineError("other", entry.error);
    const match = /^Loaded image(?: ID)?: (.+)$/.exec((entry.stream ?? "").trim());
    if (match && loaded.length < 1000) loaded.push(match[1]!.slice(0, 1000));
  }
  return loaded;
}
