// `--sync`: wait for the action an asynchronous call left, streaming its log lines (to stderr, so
// stdout stays the command's answer) with a spinner on a terminal and plain lines when piped.
// The exit code is non-zero when the action ends Failed or Canceled. Ctrl-C asks whether to cancel
// the action (on a terminal); without one it leaves the action running and says how to cancel it.
import readline from "node:readline";
import type WebSocket from "ws";
import type { Action } from "../contract/action.ts";
import { actionEnded } from "../domain/states.ts";
import { type Client, uuidOf } from "./client.ts";
import { CliError, EXIT } from "./errors.ts";
import { elapsed, type Output, stopwatch } from "./output.ts";

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

export interface FollowOptions {
  /** Prints nothing but the outcome (the log lines are still read to know when it ends). */
  silent?: boolean;
  stdin?: NodeJS.ReadStream;
  /** Exit non-zero when the action does not succeed (default true). */
  check?: boolean;
}

class Spinner {
  private timer: NodeJS.Timeout | undefined;
  private frame = 0;
  private shown = false;

  constructor(
    private readonly stream: NodeJS.WriteStream,
    private readonly text: () => string,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.draw(), 100);
    this.timer.unref();
    this.draw();
  }

  private draw(): void {
    this.frame = (this.frame + 1) % FRAMES.length;
    this.stream.write(`\r\x1b[K${FRAMES[this.frame]} ${this.text()}`);
    this.shown = true;
  }

  /** Clears the line, runs `fn` (which prints whole lines), then draws again. */
  around(fn: () => void): void {
    if (this.shown) this.stream.write("\r\x1b[K");
    fn();
    if (this.timer) this.draw();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.shown) this.stream.write("\r\x1b[K");
    this.shown = false;
  }
}

function ask(stdin: NodeJS.ReadStream, stderr: NodeJS.WritableStream, question: string): Promise<boolean> {
  return new Promise((resolve) => {
    const rl = readline.createInterface({ input: stdin, output: stderr, terminal: true });
    let answered = false;
    rl.question(question, (answer) => {
      answered = true;
      rl.close();
      resolve(/^y(es)?$/i.test(answer.trim()));
    });
    rl.on("SIGINT", () => {
      rl.close();
      if (!answered) resolve(true); // a second Ctrl-C while asking: yes, cancel it
    });
    rl.on("close", () => {
      if (!answered) resolve(false);
    });
  });
}

/** What following an action reads of it. */
type SeenAction = Pick<Action, "action" | "state" | "start_date" | "end_date">;

/** Follows the action at `actionUri` to its end; resolves with the final Action. */
export async function followAction(
  client: Client,
  out: Output,
  actionUri: string,
  opts: FollowOptions = {},
): Promise<SeenAction> {
  const uuid = uuidOf(actionUri);
  const stderr = process.stderr;
  let action: SeenAction = { action: "action", state: "Pending", start_date: null, end_date: null };
  // start_date and end_date hold whole seconds: counted from them alone, the spinner would run up to
  // a second ahead. An action seen unfinished here ran no earlier than this wait began, and ended no
  // later than it was seen ended.
  const began = Date.now();
  let seenUnfinished = false;
  const since = () => Math.max(Date.parse(action.start_date ?? ""), began);
  let spinner: Spinner | undefined;
  const print = (line: string) => {
    if (opts.silent) return;
    if (spinner) spinner.around(() => stderr.write(`${line}\n`));
    else stderr.write(`${line}\n`);
  };
  // Ctrl-C is ours from the first moment: before the first answer too, it leaves the action running.
  let interrupted: ((err: Error) => void) | undefined;
  const interruption = new Promise<never>((_, reject) => {
    interrupted = reject;
  });
  interruption.catch(() => {});
  let asking = false;
  const stdin = opts.stdin ?? process.stdin;
  const onSigint = () => {
    if (asking) return;
    if (!stdin.isTTY) {
      spinner?.stop();
      interrupted?.(
        new CliError(
          `interrupted: action ${uuid} goes on without waiting (berth action cancel ${uuid} cancels it)`,
          EXIT.interrupted,
        ),
      );
      return;
    }
    asking = true;
    spinner?.stop();
    void ask(stdin, stderr, `Cancel action ${action.action} (${uuid.slice(0, 8)})? [y/N] `).then(
      async (yes) => {
        asking = false;
        if (yes) {
          try {
            await client.request("POST", `${actionUri}cancel/`);
            print(`canceling ${action.action} ${uuid}`);
          } catch (err) {
            print(`cannot cancel: ${(err as Error).message}`);
          }
        } else {
          print("still waiting (Ctrl-C again to cancel)");
        }
        spinner?.start();
      },
    );
  };
  process.on("SIGINT", onSigint);

  try {
    action = await Promise.race([client.get<Action>(actionUri), interruption]);
    seenUnfinished = !actionEnded(action.state);
    if (stderr.isTTY && !opts.silent) {
      spinner = new Spinner(
        stderr,
        () =>
          `${action.action} ${out.state(action.state)} ${typeof action.start_date === "string" ? stopwatch(Date.now() - since()) : ""}`,
      );
    }
    if (!spinner && !opts.silent) stderr.write(`${action.action} ${uuid} ${action.state}\n`);
    spinner?.start();
    const stop = new AbortController();
    interruption.catch(() => stop.abort());
    await Promise.race([streamLog(client, actionUri, print, stop.signal), interruption]);
    // The log stream closes when the action ends; a broken stream falls back on polling.
    for (;;) {
      action = await client.get<Action>(actionUri);
      if (actionEnded(action.state)) break;
      await Promise.race([new Promise((r) => setTimeout(r, 300)), interruption]);
    }
  } finally {
    process.off("SIGINT", onSigint);
    spinner?.stop();
  }
  if (!opts.silent) {
    const took =
      seenUnfinished && typeof action.start_date === "string"
        ? stopwatch(Date.now() - since())
        : elapsed(action.start_date, action.end_date);
    stderr.write(`${action.action} ${out.state(action.state)} in ${took}\n`);
  }
  if ((opts.check ?? true) && action.state !== "Success") {
    throw new CliError(`action ${action.action} ${uuid} ended ${action.state}`);
  }
  return action;
}

/** Prints every log line of the action until the server closes the stream (the action ended). */
async function streamLog(
  client: Client,
  actionUri: string,
  print: (line: string) => void,
  signal: AbortSignal,
): Promise<void> {
  const onMessage = (data: WebSocket.RawData, isBinary: boolean) => {
    if (isBinary) return;
    try {
      const frame = JSON.parse(data.toString());
      if (frame?.type === "log" && typeof frame.log === "string") print(frame.log.replace(/\n$/, ""));
    } catch {
      // not a frame of ours
    }
  };
  try {
    const stream = await client.connect(`${actionUri}logs/`, { tail: 10_000, follow: true }, onMessage);
    signal.addEventListener("abort", () => stream.ws.terminate(), { once: true });
    if (signal.aborted) stream.ws.terminate();
    await stream.closed;
  } catch {
    // polling the action still tells when it ends
  }
}
