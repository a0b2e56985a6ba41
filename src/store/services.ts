// `store.services`: the section of services and their containers as the rest of the code uses it,
// composed of three parts with one job each — service rows and their links (service-rows.ts),
// reads of container rows (container-reads.ts) and writes of container rows (container-writes.ts).
// Each method here hands its arguments to its part unchanged; the statements live in the parts.
import { ContainerReads } from "./container-reads.ts";
import { ContainerWrites } from "./container-writes.ts";
import type { RevisionStore } from "./revisions.ts";
import { ServiceRows } from "./service-rows.ts";
import type { Kernel } from "./types.ts";
import { viewVersions } from "./view-reads.ts";

export type { ComparedContainer, ContainerQuery, ViewedContainer } from "./container-reads.ts";
export { type ContainerPatch, type NewContainer, newContainerRow } from "./container-writes.ts";
export type { IncomingLink, NewService, ServiceQuery } from "./service-rows.ts";
export type { ContainerRow, ServiceRow } from "./types.ts";

export class ServiceStore {
  private readonly rows: ServiceRows;
  private readonly reads: ContainerReads;
  private readonly writes: ContainerWrites;

  constructor(private readonly kernel: Kernel) {
    const s = kernel;
    this.rows = new ServiceRows(s);
    this.reads = new ContainerReads(s);
    this.writes = new ContainerWrites(s);
  }

  // ---- service rows and links (service-rows.ts) ----------------------------------------------

  /** Services' kept definitions (revisions.ts). */
  get revisions(): RevisionStore {
    return this.rows.revisions;
  }
  insertService(...a: Parameters<ServiceRows["insertService"]>) {
    return this.rows.insertService(...a);
  }
  indexLinks(...a: Parameters<ServiceRows["indexLinks"]>) {
    return this.rows.indexLinks(...a);
  }
  findService(...a: Parameters<ServiceRows["findService"]>) {
    return this.rows.findService(...a);
  }
  updateService(...a: Parameters<ServiceRows["updateService"]>) {
    return this.rows.updateService(...a);
  }
  findLiveServiceByName(...a: Parameters<ServiceRows["findLiveServiceByName"]>) {
    return this.rows.findLiveServiceByName(...a);
  }
  servicesByUuid(...a: Parameters<ServiceRows["servicesByUuid"]>) {
    return this.rows.servicesByUuid(...a);
  }
  linksTo(...a: Parameters<ServiceRows["linksTo"]>) {
    return this.rows.linksTo(...a);
  }
  listServices(...a: Parameters<ServiceRows["listServices"]>) {
    return this.rows.listServices(...a);
  }
  liveServices(...a: Parameters<ServiceRows["liveServices"]>) {
    return this.rows.liveServices(...a);
  }
  servicesOfStack(...a: Parameters<ServiceRows["servicesOfStack"]>) {
    return this.rows.servicesOfStack(...a);
  }
  servicesOfStacks(...a: Parameters<ServiceRows["servicesOfStacks"]>) {
    return this.rows.servicesOfStacks(...a);
  }

  // ---- reads of container rows (container-reads.ts) ------------------------------------------

  findContainer(...a: Parameters<ContainerReads["findContainer"]>) {
    return this.reads.findContainer(...a);
  }
  containersByUuid(...a: Parameters<ContainerReads["containersByUuid"]>) {
    return this.reads.containersByUuid(...a);
  }
  containerHeads(...a: Parameters<ContainerReads["containerHeads"]>) {
    return this.reads.containerHeads(...a);
  }
  containersOfService(...a: Parameters<ContainerReads["containersOfService"]>) {
    return this.reads.containersOfService(...a);
  }
  containerHeadsOfService(...a: Parameters<ContainerReads["containerHeadsOfService"]>) {
    return this.reads.containerHeadsOfService(...a);
  }
  containersOfServices(...a: Parameters<ContainerReads["containersOfServices"]>) {
    return this.reads.containersOfServices(...a);
  }
  viewedContainers(...a: Parameters<ContainerReads["viewedContainers"]>) {
    return this.reads.viewedContainers(...a);
  }
  deployedSpecs(...a: Parameters<ContainerReads["deployedSpecs"]>) {
    return this.reads.deployedSpecs(...a);
  }
  containerVersions(...a: Parameters<ContainerReads["containerVersions"]>) {
    return this.reads.containerVersions(...a);
  }
  /** containerVersions and linksTo in one statement (view-reads.ts). */
  viewVersions(versionsOf: readonly string[], linksTo: readonly string[]) {
    return viewVersions(this.kernel, versionsOf, linksTo);
  }
  liveContainers(...a: Parameters<ContainerReads["liveContainers"]>) {
    return this.reads.liveContainers(...a);
  }
  comparedContainers(...a: Parameters<ContainerReads["comparedContainers"]>) {
    return this.reads.comparedContainers(...a);
  }
  containerLoads(...a: Parameters<ContainerReads["containerLoads"]>) {
    return this.reads.containerLoads(...a);
  }
  countLiveContainersOnNodes(...a: Parameters<ContainerReads["countLiveContainersOnNodes"]>) {
    return this.reads.countLiveContainersOnNodes(...a);
  }
  listContainers(...a: Parameters<ContainerReads["listContainers"]>) {
    return this.reads.listContainers(...a);
  }

  // ---- writes of container rows (container-writes.ts) ----------------------------------------

  insertContainer(...a: Parameters<ContainerWrites["insertContainer"]>) {
    return this.writes.insertContainer(...a);
  }
  insertContainers(...a: Parameters<ContainerWrites["insertContainers"]>) {
    return this.writes.insertContainers(...a);
  }
  updateContainer(...a: Parameters<ContainerWrites["updateContainer"]>) {
    return this.writes.updateContainer(...a);
  }
  updateContainers(...a: Parameters<ContainerWrites["updateContainers"]>) {
    return this.writes.updateContainers(...a);
  }
  patchContainers(...a: Parameters<ContainerWrites["patchContainers"]>) {
    return this.writes.patchContainers(...a);
  }
}
