// Waiting for linked services: a service starts once every service it links to has a running
// container with an address, because a container's link variables are fixed when it is created.
import type { StepContext } from "../actions/types.ts";
import { specOf } from "../store/codec.ts";
import type { ServiceRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";

/** How often a start waiting for its link targets looks again. */
const LINK_WAIT_POLL_MS = 200;

/**
 * A container gets its links' variables and host names when it is created, and its environment
 * can never change afterwards: so a service starts only once every service it links to has a
 * running container with an address (stacks start in link order for the same reason; services
 * started one by one get the same rule). A target whose links lead back to this service (links
 * going round in a circle) is not waited for: neither could ever start first.
 */
export async function waitForLinkTargets(
  store: Store,
  s: ServiceRow,
  ctx: StepContext<unknown>,
  opts: { timeoutMs?: number } = {},
): Promise<void> {
  const links = specOf(s).linked_to_service.filter((l) => l.to_service !== s.uuid);
  if (links.length === 0) return;
  const circular = await linksBackTo(
    store,
    links.map((l) => l.to_service),
    s.uuid,
  );
  const targets = [...new Set(links.map((l) => l.to_service))].filter((u) => !circular.has(u));
  if (targets.length === 0) return;
  const timeoutMs = opts.timeoutMs ?? 120_000;
  const seconds = Math.round(timeoutMs / 1000);
  const deadline = Date.now() + timeoutMs;
  let logged = false;
  for (;;) {
    const services = await store.services.servicesByUuid(targets);
    const gone = targets.filter((u) => !services.some((x) => x.uuid === u && x.state !== "Terminated"));
    if (gone.length) {
      const names = links.filter((l) => gone.includes(l.to_service)).map((l) => l.name);
      throw new Error(
        `service ${s.name} links to a service that no longer exists (link ${names.join(", ")})`,
      );
    }
    const running = new Set(
      (await store.services.containersOfServices(targets, { states: ["Running"] }))
        .filter((c) => c.private_ip !== "")
        .map((c) => c.service_uuid),
    );
    // A target on the host network has no address of its own to link to: nothing to wait for.
    const waiting = services
      .filter((x) => !running.has(x.uuid) && specOf(x).net !== "host")
      .map((x) => x.name);
    if (waiting.length === 0) {
      if (logged) await ctx.log(`Linked services are running; starting ${s.name}`);
      return;
    }
    if (!logged) {
      await ctx.log(
        `Waiting for linked service(s) ${waiting.join(", ")} to have a running container (up to ${seconds} s), so that ${s.name}'s containers get their links`,
      );
      logged = true;
    }
    if (Date.now() >= deadline) {
      throw new Error(
        `linked service(s) ${waiting.join(", ")} had no running container after ${seconds} s; start ${waiting.length > 1 ? "them" : "it"}, then start ${s.name} again`,
      );
    }
    if (ctx.signal.aborted) throw new Error("canceled while waiting for linked services");
    await new Promise((resolve) => setTimeout(resolve, LINK_WAIT_POLL_MS));
  }
}

/** Which of `from` lead through their links (any number of them) back to `to`. */
async function linksBackTo(store: Store, from: string[], to: string): Promise<Set<string>> {
  const out = new Set<string>();
  for (const start of new Set(from)) {
    const seen = new Set<string>();
    let level = [start];
    while (level.length && !out.has(start)) {
      const next: string[] = [];
      for (const svc of await store.services.servicesByUuid(level.filter((u) => !seen.has(u)))) {
        seen.add(svc.uuid);
        for (const l of specOf(svc).linked_to_service) {
          if (l.to_service === to) out.add(start);
          else if (!seen.has(l.to_service)) next.push(l.to_service);
        }
      }
      level = next;
    }
  }
  return out;
}
