// A running container's link host entries follow its links: the entries it should hold are
// rewritten in place when they differ from those written into it (Engine.replaceHostEntries).

import type { Engine } from "../drivers/engine.ts";
import { isEngineError } from "../drivers/engine.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
import { linkHostsOf } from "../store/codec.ts";
import type { ContainerRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { sameEntries } from "./links.ts";

export class HostEntries {
  /** Engine containers (with the entries asked for) whose image could not rewrite its hosts. */
  private readonly hostsRefused = new Set<string>();

  constructor(
    private readonly d: {
      store: Store;
      engines: EngineSource;
      /** The link host entries a container should hold now; undefined: none to follow. */
      linkHostsFor?(c: ContainerRow): Promise<string[] | undefined>;
    },
  ) {}

  private async engineOf(c: Pick<ContainerRow, "node_uuid">): Promise<Engine> {
    const node = await this.d.store.nodes.knownNode(c.node_uuid);
    if (!node) throw new Error(`node ${c.node_uuid} of the container no longer exists`);
    return this.d.engines.forNode(node);
  }

  /**
   * Makes a running container's link host entries follow its links (see Engine.replaceHostEntries):
   * when the entries it should hold differ from the ones written into it, they are rewritten in
   * place and recorded. `mayAct` is asked before the engine is (the reconciler leaves containers an
   * action works on alone). Returns false when the engine could not do it (an image without a
   * shell): the container then stays unsynchronized until a redeploy. Environment variables cannot
   * follow: an engine cannot change a running container's environment.
   */
  async ensure(
    uuid: string,
    opts: { mayAct?: (c: ContainerRow) => Promise<boolean> } = {},
  ): Promise<boolean> {
    const c = await this.d.store.services.findContainer(uuid);
    if (c?.state !== "Running" || !c.engine_id || c.link_hosts === null) return true;
    const desired = await this.d.linkHostsFor?.(c);
    if (!desired) return true;
    const written = linkHostsOf(c);
    if (sameEntries(written, desired)) return true;
    const key = `${c.engine_id}\u0000${JSON.stringify(desired)}`;
    if (this.hostsRefused.has(key)) return false;
    if (opts.mayAct && !(await opts.mayAct(c))) return true;
    const engine = await this.engineOf(c);
    try {
      await engine.replaceHostEntries(c.engine_id, { remove: written, add: desired });
    } catch (err) {
      if (isEngineError(err, "other")) {
        // Not retried for the same container and entries: the image cannot do it.
        this.hostsRefused.add(key);
        return false;
      }
      throw err;
    }
    await this.d.store.mutate("container", c.uuid, (r) =>
      r.engine_id === c.engine_id ? { link_hosts: JSON.stringify(desired) } : undefined,
    );
    return true;
  }
}
