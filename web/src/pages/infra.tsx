// Node clusters (create from the catalogue: provider → region → node type, with the provider's
// own options and disk rules; deploy, scale, tags, terminate) and nodes (engine facts,
// health-check, engine-upgrade, nickname and tags, terminate).// Each part is a module of ./infra/; the router imports the pages from here.
export { ClusterCreate } from "./infra/cluster-create.tsx";
export { ClusterDetail, ClusterList } from "./infra/clusters.tsx";
export { NodeDetail, NodeList } from "./infra/nodes.tsx";
