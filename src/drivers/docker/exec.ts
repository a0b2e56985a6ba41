// Commands in a running container for the Docker driver: an exec session over a hijacked
// connection (its output queued within bounds, its exit code asked for once the output ends), and
// the /etc/hosts rewrite built on it. DockerEngine delegates to them.
import { ENGINE_ANSWER_BYTES } from "../bounds.ts";
import {
  AsyncQueue,
  EngineError,
  EXEC_EXIT_WAIT_MS,
  type ExecOptions,
  type ExecOutput,
  type ExecSession,
  envToList,
  execStillRunning,
} from "../engine.ts";
import { hostsCommand } from "./hosts.ts";
import { demultiplex, type Frame, rawFrames } from "./streams.ts";
import type { DockerTransport } from "./transport.ts";

export async function replaceHostEntries(
  t: DockerTransport,
  id: string,
  entries: { remove: string[]; add: string[] },
): Promise<void> {
  const session = await exec(t, id, { cmd: hostsCommand(entries) });
  session.end();
  // The script prints only on failure; what it prints is kept up to a bound, the rest read and dropped.
  let output = "";
  for await (const out of session.output) {
    if (output.length < ENGINE_ANSWER_BYTES.commandOutput)
      output += out.data.toString("utf8").slice(0, ENGINE_ANSWER_BYTES.commandOutput - output.length);
  }
  const code = await session.exitCode;
  if (code !== 0)
    throw new EngineError("other", `could not rewrite /etc/hosts (exit code ${code}): ${output.trim()}`);
}

export async function exec(t: DockerTransport, id: string, options: ExecOptions): Promise<ExecSession> {
  const tty = options.tty ?? false;
  const created = await t.json<{ Id: string }>({
    method: "POST",
    path: `/containers/${encodeURIComponent(id)}/exec`,
    body: {
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      Tty: tty,
      Cmd: options.cmd,
      Env: options.env ? envToList(options.env) : undefined,
      User: options.user,
      WorkingDir: options.workingDir,
    },
    ok: [201],
  });
  const socket = await t.dial(
    {
      method: "POST",
      path: `/exec/${created.Id}/start`,
      body: { Detach: false, Tty: tty },
      ok: [200, 101],
      signal: options.signal,
    },
    "hijack",
  );
  const abort = () => socket.destroy();
  options.signal?.addEventListener("abort", abort, { once: true });

  // Output is read into a queue as it comes: the exit code is only known after the output has
  // ended, and a caller may look at the exit code before reading the output. Beyond
  // ENGINE_ANSWER_BYTES.execQueue not yet taken, reading waits (the engine is held back by flow
  // control), so output nobody reads is never held without bound.
  const output = new AsyncQueue<ExecOutput>(() => socket.destroy(), {
    max: ENGINE_ANSWER_BYTES.execQueue,
    size: (o) => o.data.length,
  });
  const frames: AsyncIterable<Frame> = tty ? rawFrames(socket) : demultiplex(socket);
  const outputDone = (async () => {
    try {
      for await (const frame of frames) {
        output.push(frame);
        await output.room();
      }
      output.end();
    } catch (error) {
      if (options.signal?.aborted) output.end();
      else output.fail(new EngineError("unreachable", `exec stream broke: ${(error as Error).message}`));
    } finally {
      options.signal?.removeEventListener("abort", abort);
    }
  })();
  const exitCode = outputDone.then(async () => {
    const deadline = Date.now() + EXEC_EXIT_WAIT_MS;
    for (;;) {
      const state = await t.json<{ Running: boolean; ExitCode: number | null }>({
        method: "GET",
        path: `/exec/${created.Id}/json`,
        ok: [200],
      });
      if (!state.Running && state.ExitCode !== null) return state.ExitCode;
      if (Date.now() > deadline) throw execStillRunning(created.Id);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  });
  // Marks the promise handled: a caller that never asks for the exit code must not crash the process.
  exitCode.catch(() => {});
  return {
    write: (data) => {
      socket.write(data);
    },
    // Half-closing the hijacked connection is how the engine learns that stdin has ended.
    end: () => {
      socket.end();
    },
    output,
    exitCode,
    resize: async (size) => {
      if (!tty) return;
      await t.dial(
        {
          method: "POST",
          path: `/exec/${created.Id}/resize`,
          query: { h: size.rows, w: size.cols },
          ok: [200, 201],
        },
        "empty",
      );
    },
  };
}
