// The CLI's health-check options (issue 29): `--health` names the check, the other options its
// timing. They become the `health_check` of a create or update body; the server judges the rest.
import { type Command, InvalidArgumentError } from "commander";
import type { HealthCheckInput } from "../domain/health.ts";
import { durationToSeconds } from "../domain/health.ts";

export interface HealthOptions {
  health?: HealthCheckInput;
  healthInterval?: number;
  healthTimeout?: number;
  healthRetries?: number;
  healthStartPeriod?: number;
}

/** `cmd:<command>`, `http:<port>[/path][=status]`, `tcp:<port>` or `none`. */
export function parseHealth(value: string): HealthCheckInput {
  const text = value.trim();
  if (text === "none") return { type: "none" };
  if (text.startsWith("cmd:")) return { type: "command", command: text.slice(4) };
  const tcp = /^tcp:(\d+)$/.exec(text);
  if (tcp) return { type: "tcp", port: Number(tcp[1]) };
  const http = /^http:(\d+)(\/[^=\s]*)?(?:=(\d{3}))?$/.exec(text);
  if (http)
    return {
      type: "http",
      port: Number(http[1]),
      path: http[2] ?? "/",
      ...(http[3] ? { status: Number(http[3]) } : {}),
    };
  throw new InvalidArgumentError("expected cmd:<command>, http:<port>[/path][=status], tcp:<port> or none");
}

function seconds(value: string): number {
  const s = durationToSeconds(value);
  if (typeof s === "string") throw new InvalidArgumentError(s);
  return s;
}

function count(value: string): number {
  if (!/^\d+$/.test(value.trim())) throw new InvalidArgumentError("must be a whole number");
  return Number(value);
}

export function healthOptions(cmd: Command): Command {
  return cmd
    .option(
      "--health <check>",
      "health check run inside each container: cmd:<command>, http:<port>[/path][=status], tcp:<port>, or none (turns off the image's)",
      parseHealth,
    )
    .option("--health-interval <duration>", "time between checks: seconds or 5s, 500ms (default 5s)", seconds)
    .option("--health-timeout <duration>", "time one check may take (default 3s)", seconds)
    .option("--health-retries <n>", "failures in a row that make a container unhealthy (default 3)", count)
    .option("--health-start-period <duration>", "time after a start when failures do not count", seconds);
}

/** The body's `health_check`, or undefined when no health option was given. */
export function healthBody(o: HealthOptions): HealthCheckInput | undefined {
  const times = {
    ...(o.healthInterval !== undefined ? { interval: o.healthInterval } : {}),
    ...(o.healthTimeout !== undefined ? { timeout: o.healthTimeout } : {}),
    ...(o.healthRetries !== undefined ? { retries: o.healthRetries } : {}),
    ...(o.healthStartPeriod !== undefined ? { start_period: o.healthStartPeriod } : {}),
  };
  if (o.health === undefined) {
    if (Object.keys(times).length === 0) return undefined;
    throw new InvalidArgumentError(
      "--health-interval, --health-timeout, --health-retries and --health-start-period need --health",
    );
  }
  return o.health.type === "none" ? o.health : { ...o.health, ...times };
}
