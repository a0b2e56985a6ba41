// Honest states: a container that exited with an error (or whose health check fails) shows red,
// with its exit code and the last lines it printed, on its own page, on its service's page and in
// lists — never a grey "Stopped" that looks like a choice.
import { useEffect, useState } from "preact/hooks";
import { wsUrl } from "./live.ts";
import { StateBadge } from "./ui.tsx";

export interface ExitFacts {
  name?: string;
  state?: string;
  exit_code?: number | null;
  exit_code_msg?: string | null;
  /** Issue 29's wire field: "starting" | "healthy" | "unhealthy" | "none" (absent on older servers). */
  health?: string | null;
  /** What its check printed when its health last changed (why it is unhealthy). */
  health_output?: string | null;
  /** Its service's own check (null: the image's HEALTHCHECK). */
  health_check?: { type: string; command?: string | null; port?: number | null; path?: string | null } | null;
}

/** Whether a container stopped on its own with an error (not terminated, not running). */
export function crashed(c: ExitFacts): boolean {
  return (
    c.state !== "Running" &&
    c.state !== "Terminated" &&
    typeof c.exit_code === "number" &&
    // 130, 137 and 143 are how a stop (SIGINT, SIGKILL, SIGTERM) ends a process: not a crash.
    ![0, 130, 137, 143].includes(c.exit_code)
  );
}

export const unhealthy = (c: ExitFacts): boolean => c.health === "unhealthy";

/** Why a container is unhealthy: what its check printed, else what its check is. */
export function unhealthyWhy(c: ExitFacts): string {
  const said = c.health_output?.trim();
  if (said) return said;
  const h = c.health_check;
  if (!h) return "its image's health check fails";
  if (h.type === "command") return `its check \`${h.command ?? ""}\` fails`;
  if (h.type === "http") return `GET ${h.path ?? "/"} on port ${h.port} does not answer as expected`;
  if (h.type === "tcp") return `nothing accepts connections on port ${h.port}`;
  return "its health check fails";
}

const clip = (text: string, n: number) => (text.length > n ? `${text.slice(0, n - 1)}…` : text);

/** "exited with code 3 (…)" */
export function exitText(c: ExitFacts): string {
  return `exited with code ${c.exit_code}${c.exit_code_msg ? ` (${c.exit_code_msg})` : ""}`;
}

/** A container's state: red with its exit code when it crashed, its health when it has one. */
export function ContainerState({ c }: { c: ExitFacts }) {
  const failed = crashed(c);
  return (
    <span class="state-line">
      <StateBadge state={c.state} bad={failed} />
      {failed && <span class="state bad exit">exit {c.exit_code}</span>}
      {c.health && c.health !== "none" && (
        <span
          class={`state health ${c.health === "unhealthy" ? "bad" : c.health === "healthy" ? "good" : "busy"}`}
        >
          {c.health}
        </span>
      )}
      {c.health === "unhealthy" && c.state === "Running" && (
        <span class="health-why" title={unhealthyWhy(c)}>
          {clip(unhealthyWhy(c), 120)}
        </span>
      )}
    </span>
  );
}

/** The last lines a container printed (its log, not followed). */
export function useLastLines(logsPath: string | undefined, lines = 10): string[] | undefined {
  const [got, setGot] = useState<string[] | undefined>(undefined);
  useEffect(() => {
    if (!logsPath) return;
    const out: string[] = [];
    const ws = new WebSocket(wsUrl(`${logsPath}?tail=${lines}&follow=false`));
    ws.onmessage = (m) => {
      try {
        const f = JSON.parse(String(m.data)) as { type: string; log?: string; source?: string };
        if (f.type === "log" && f.log !== undefined)
          out.push(`${f.source ? `${f.source} ` : ""}${f.log.replace(/\n$/, "")}`);
      } catch {
        // Not a frame: nothing to show.
      }
    };
    ws.onclose = () => setGot(out.slice(-lines));
    return () => ws.close();
  }, [logsPath, lines]);
  return got;
}

/** The red box of a crashed container: what it said last, and its exit code. */
export function CrashPanel(props: { c: ExitFacts; logsPath: string; link?: string }) {
  const last = useLastLines(props.logsPath);
  return (
    <section class="crash" role="alert" aria-label="Crashed">
      <h2>
        {props.link ? <a href={props.link}>{props.c.name}</a> : props.c.name} {exitText(props.c)}
      </h2>
      {last === undefined ? (
        <p class="hint">Reading its last lines…</p>
      ) : last.length === 0 ? (
        <p class="hint">It printed nothing.</p>
      ) : (
        <pre class="crash-lines">{last.join("\n")}</pre>
      )}
    </section>
  );
}
