// `docker exec` in the fake engine (fake-engine.ts): a fake program run in a running container, its
// output (a tty's line discipline, CRLF and echo included), stdin, exit code and exec events, like Docker's.
import {
  AsyncQueue,
  type EngineError,
  EXEC_EXIT_WAIT_MS,
  type ExecOptions,
  type ExecOutput,
  type ExecSession,
  execStillRunning,
  type OutputStream,
} from "../engine.ts";
import { DEFAULT_PATH, type FakeContainer, joined, randomHex } from "./fake-model.ts";
import { FakeProcess, hasProgram, type ProcessIO } from "./shell.ts";
import { LineDiscipline } from "./tty.ts";

/** What an exec needs of its engine: its events, and whether the container is still recorded. */
export interface ExecHooks {
  emit(container: FakeContainer, action: string, extra?: { exitCode?: number; execID?: string }): void;
  recorded(containerId: string): boolean;
}

/** Starts `options.cmd` in a running container (the caller checked its state). */
export function startExec(container: FakeContainer, options: ExecOptions, hooks: ExecHooks): ExecSession {
  const tty = options.tty ?? false;
  const stdin = new AsyncQueue<string>();
  const output = new AsyncQueue<ExecOutput>();
  const send = (stream: OutputStream, text: string) => {
    if (text)
      output.push({
        stream: tty ? "stdout" : stream,
        data: Buffer.from(tty ? text.replace(/\r?\n/g, "\r\n") : text),
      });
  };
  const io: ProcessIO = {
    write: send,
    stdin,
    env: { PATH: DEFAULT_PATH, HOSTNAME: container.hostname, ...container.env, ...options.env },
    hostname: container.hostname,
    tty,
  };
  const terminal = new LineDiscipline({
    echo: (t) => send("stdout", t),
    deliver: (t) => stdin.push(t),
    end: () => stdin.end(),
  });
  const execId = randomHex(32);
  hooks.emit(container, "exec_create", { execID: execId });
  hooks.emit(container, "exec_start", { execID: execId });
  let exitCode: Promise<number>;
  if (!hasProgram(options.cmd, container.image.programs)) {
    // Docker reports a missing program on the exec's output and finishes it with 126.
    output.push({
      stream: "stdout",
      data: Buffer.from(
        `OCI runtime exec failed: exec failed: unable to start container process: exec: "${options.cmd[0]}": executable file not found in $PATH: unknown\r\n`,
      ),
    });
    output.end();
    exitCode = Promise.resolve(126);
  } else {
    const started = new FakeProcess(options.cmd, io, { pid1: false, programs: container.image.programs });
    joined(container, "execs", started);
    exitCode = started.exited.then((code) => {
      container.execs.delete(started);
      output.end();
      if (hooks.recorded(container.id)) hooks.emit(container, "exec_die", { execID: execId, exitCode: code });
      return code;
    });
  }
  // Like a dropped connection to Docker: our side ends and stdin closes; the process itself goes on.
  options.signal?.addEventListener(
    "abort",
    () => {
      stdin.end();
      output.end();
    },
    { once: true },
  );
  const settled = exitCode;
  let hangUp: ((error: EngineError) => void) | undefined;
  const hungUp = new Promise<never>((_, reject) => {
    hangUp = reject;
  });
  exitCode = Promise.race([settled, hungUp]);
  exitCode.catch(() => {});
  return {
    write: (data) => {
      const text = typeof data === "string" ? data : Buffer.from(data).toString("utf8");
      if (!tty) {
        stdin.push(text);
        return;
      }
      // A terminal echoes what is typed and hands over whole lines (tty.ts).
      terminal.input(text);
    },
    end: () => {
      if (!tty) {
        stdin.end();
        return;
      }
      // With a tty, Docker closes the connection but the command keeps running.
      output.end();
      const timer = setTimeout(() => hangUp?.(execStillRunning(execId)), EXEC_EXIT_WAIT_MS);
      void settled.then(() => clearTimeout(timer));
    },
    output,
    exitCode,
    // Fake programs draw nothing that depends on the terminal's size: a resize changes nothing.
    resize: async () => {},
  };
}
