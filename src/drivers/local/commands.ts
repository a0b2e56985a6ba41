// How the local provider runs host tools. Always an executable plus an argument array (never a
// shell string), so node ids, paths and addresses can never be interpreted by a shell.
import { execFile, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";

export interface CommandResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  file: string;
  args: readonly string[];
  timeoutMs?: number;
}

export interface SpawnDetachedOptions {
  file: string;
  args: readonly string[];
  /** stdout and stderr are appended here, so an engine's own log survives the provider. */
  logPath: string;
  env: NodeJS.ProcessEnv;
}

export interface CommandRunner {
  /** Runs to completion; a non-zero exit is reported in the result, not thrown. */
  run(options: RunOptions): Promise<CommandResult>;
  /** Starts a long-running process in its own session that outlives this one; returns its pid. */
  spawnDetached(options: SpawnDetachedOptions): Promise<number>;
}

export class CommandError extends Error {
  constructor(
    readonly command: string,
    readonly result: CommandResult,
  ) {
    super(`${command} exited with ${result.exitCode}: ${result.stderr.trim() || result.stdout.trim()}`);
  }
}

const DEFAULT_TIMEOUT_MS = 30_000;

export function createCommandRunner(): CommandRunner {
  return {
    run(options) {
      return new Promise((resolve) => {
        execFile(
          options.file,
          [...options.args],
          { timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024, encoding: "utf8" },
          (error, stdout, stderr) => {
            if (!error) return resolve({ exitCode: 0, stdout, stderr });
            // A missing executable or a timeout has no numeric code; report it as a failure
            // with the reason in stderr so callers handle one shape.
            const code = typeof error.code === "number" ? error.code : 127;
            resolve({ exitCode: code, stdout, stderr: stderr || error.message });
          },
        );
      });
    },

    spawnDetached(options) {
      return new Promise((resolve, reject) => {
        const logFd = openSync(options.logPath, "a", 0o600);
        try {
          const child = spawn(options.file, [...options.args], {
            detached: true,
            stdio: ["ignore", logFd, logFd],
            env: options.env,
          });
          child.once("error", reject);
          child.once("spawn", () => {
            // Not waiting on the child: it must keep running if Berth stops. libuv still
            // reaps it if it exits while this process lives.
            child.unref();
            if (child.pid === undefined) reject(new Error(`${options.file} started without a pid`));
            else resolve(child.pid);
          });
        } finally {
          closeSync(logFd);
        }
      });
    },
  };
}

export function formatCommand(file: string, args: readonly string[]): string {
  return [file, ...args]
    .map((part) => (/^[\w@%+=:,./-]+$/.test(part) ? part : JSON.stringify(part)))
    .join(" ");
}
