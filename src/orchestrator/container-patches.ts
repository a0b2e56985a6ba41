// What the runtime writes to a container record, as pure functions of the record and what its
// engine reported: the end of an action's engine step, an observation, a removal, a redeploy.
import { randomBytes } from "node:crypto";
import { environmentFromEngine, linkHostsFromEngine } from "../domain/container-spec.ts";
import type { ServiceSpec } from "../domain/service.ts";
import type { ContainerView } from "../drivers/engine.ts";
import { decodeSpec } from "../store/codec.ts";
import type { ContainerPatch, ContainerRow } from "../store/services.ts";

export function exitCodeMessage(code: number | null | undefined): string | null {
  if (code === null || code === undefined) return null;
  const known: Record<number, string> = {
    0: "Exited normally",
    1: "Exited with an error (code 1)",
    125: "The engine could not run the container",
    126: "The command cannot be invoked",
    127: "The command was not found",
    130: "Interrupted (SIGINT)",
    137: "Killed (SIGKILL)",
    143: "Terminated (SIGTERM)",
  };
  return known[code] ?? `Exited with code ${code}`;
}

/**
 * What the record keeps of the engine container that embodies it, read from the engine itself:
 * its id, the environment it was created with and the link host entries it was given.
 */
function engineRecord(c: ContainerRow, view: ContainerView): ContainerPatch {
  return {
    engine_id: view.id,
    environment: JSON.stringify(environmentFromEngine(view.env, view.labels, envvarsOf(c.spec))),
    link_hosts: linkHostsFromEngine(view.labels),
  };
}

/**
 * The variables a definition sets, parsed once for a burst of records deployed with the same
 * definition (a service's containers), not once per record.
 */
let lastSpec: { json: string; envvars: ServiceSpec["container_envvars"] } | undefined;
function envvarsOf(specJson: string): ServiceSpec["container_envvars"] {
  if (lastSpec?.json !== specJson) {
    lastSpec = { json: specJson, envvars: decodeSpec(specJson).container_envvars };
  }
  return lastSpec.envvars;
}

/**
 * The write that ends an action's engine step on record `c` (as the action read it, `r` as it is
 * now): what the engine reported, and the end of the action's phase. Nothing when the record was
 * removed or moved to another generation meanwhile (the report is of a container it no longer has).
 */
export function stepDonePatch(
  c: ContainerRow,
  r: ContainerRow,
  view: ContainerView | undefined,
  now: number,
): ContainerPatch | undefined {
  if (r.destroyed_at !== null || r.generation !== c.generation) return undefined;
  const patch: ContainerPatch = { ...observedPatch(r, view, now) };
  if (r.phase !== null && r.phase === c.phase) patch.phase = null;
  return Object.keys(patch).length ? patch : undefined;
}

/** The write of a record whose engine containers an action removed: it is Terminated. */
export function removedPatch(r: ContainerRow, now: number): ContainerPatch | undefined {
  if (r.destroyed_at !== null) return undefined;
  return { desired: "terminated", destroyed_at: now, observed: "missing", phase: null };
}

/**
 * A record's move to the definition it is redeployed with. A new generation makes the running
 * engine container stale even when the definition is unchanged.
 */
export function redeployPatch(opts: { specJson: string; specVersion: number }, now: number): ContainerPatch {
  return {
    spec: opts.specJson,
    spec_version: opts.specVersion,
    generation: randomBytes(8).toString("hex"),
    // deployed_datetime is the container's last deploy, as the service's is.
    deployed_at: now,
  };
}

/**
 * What a record should say once its engine reported `view` (undefined: the engine has no
 * container of the record's generation): the patch of `observe`, undefined when nothing changes.
 */
export function observedPatch(
  r: ContainerRow,
  view: ContainerView | undefined,
  now: number,
): ContainerPatch | undefined {
  if (!view) {
    if (r.desired === "terminated") return { observed: "missing", destroyed_at: now };
    return r.engine_id === null && (r.observed === "none" || r.observed === "missing")
      ? undefined
      : { observed: "missing", engine_id: null, exit_code_msg: "The container is gone from its engine" };
  }
  const ports = Object.entries(view.ports).map(([key, outer]) => {
    const [inner, protocol] = key.split("/");
    return { inner_port: Number(inner), protocol, outer_port: outer };
  });
  const running = view.running || view.state === "restarting";
  const wasRunning = r.observed === "running" || r.observed === "restarting";
  const patch: ContainerPatch = {
    ...(view.id !== r.engine_id || r.environment === null ? engineRecord(r, view) : {}),
    engine_id: view.id,
    observed: view.state === "restarting" ? "restarting" : running ? "running" : "exited",
    exit_code: running ? null : (view.exitCode ?? null),
    exit_code_msg: running ? null : exitCodeMessage(view.exitCode ?? null),
    private_ip: view.ipAddress ?? r.private_ip,
    // Its health check's last word (null: none); a stopped container keeps its last one, as its engine does.
    health: view.health?.status ?? null,
    // Why: what the check printed as its health changed (kept while it stays, so a check whose
    // output varies does not rewrite the record at every run).
    health_output: !view.health
      ? null
      : view.health.status !== r.health || r.health_output === null
        ? view.health.lastOutput.slice(-500)
        : r.health_output,
    restart_count: view.restartCount,
    ...(ports.length ? { ports: JSON.stringify(ports) } : {}),
  };
  // The engine's own restarts (restart policy) count too, even one that happened between two
  // observations: the engine's start time moved while the record still said running.
  const restarted = view.startedAt !== undefined && view.startedAt !== r.started_at;
  if (running && (r.observed !== "running" || restarted)) {
    patch.started_at = view.startedAt ?? now;
    // Every start gives the container the /etc/hosts of its create again: rewritten entries are gone.
    patch.link_hosts = linkHostsFromEngine(view.labels);
  }
  // Any move to stopped of a container that has run counts as its last stop.
  if (!running && wasRunning && r.started_at !== null) patch.stopped_at = view.finishedAt ?? now;
  const changed = Object.entries(patch).some(([k, v]) => r[k as keyof ContainerRow] !== v);
  return changed ? patch : undefined;
}
