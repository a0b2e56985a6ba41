// `berth nodecluster …` (ls, create, inspect, scale, rm, upgrade; provider/region/nodetype/az
// listings) and `berth node …` (ls, inspect, upgrade, health-check, rm; byo and token in byo.ts).

import type { Command } from "commander";
import type { AzView, NodeTypeView, ProviderView, RegionView } from "../../contract/catalogue.ts";
import type { Node, NodeCluster, NodeClusterCreateBody, ProviderOptions } from "../../contract/nodes.ts";
import { canonicalUri, nodeTypeUri, providerUri, regionUri } from "../../domain/uri.ts";
import { API, type Query } from "../client.ts";
import { type Ctx, finish } from "../context.ts";
import { usageError } from "../errors.ts";
import { ago, type Column, lastSegment, short, str } from "../output.ts";
import { KINDS, resolve } from "../resolve.ts";
import { registerNodeTokens } from "./byo.ts";
import {
  bulk,
  collect,
  failingOption,
  inspect,
  type ListOptions,
  quietOption,
  syncOption,
  wholeNumber,
} from "./common.ts";
import { registerUnknownContainers } from "./unknown-containers.ts";

export const CLUSTER_COLUMNS: Column<NodeCluster>[] = [
  { header: "NAME", value: (n) => n.name },
  { header: "UUID", value: (n) => short(n.uuid) },
  { header: "REGION", value: (n) => lastSegment(n.region) },
  { header: "TYPE", value: (n) => lastSegment(n.node_type) },
  { header: "DEPLOYED", value: (n) => ago(n.deployed_datetime) },
  { header: "STATUS", value: (n) => n.state, state: true },
  { header: "CURRENT#NODES", value: (n) => n.current_num_nodes },
  { header: "TARGET#NODES", value: (n) => n.target_num_nodes },
];

/** A node as the list shows it: with its cluster's name. */
type ListedNode = Node & { cluster_name?: string };

export const NODE_COLUMNS: Column<ListedNode>[] = [
  { header: "UUID", value: (n) => short(n.uuid) },
  { header: "FQDN", value: (n) => n.external_fqdn },
  { header: "LASTSEEN", value: (n) => ago(n.last_seen) },
  { header: "STATUS", value: (n) => n.state, state: true },
  { header: "CLUSTER", value: (n) => n.cluster_name ?? "" },
  { header: "DOCKER_VER", value: (n) => n.docker_version ?? n.engine_version },
];

const CATALOGUE = {
  provider: (p: string) => providerUri(p),
  region: (p: string, r: string) => regionUri(p, r),
  nodetype: (p: string, t: string) => nodeTypeUri(p, t),
} as const;

/** `aws us-east-1` → the region's URI (the API's own builders); a URI given as the last name stays. */
function catalogueUri<K extends keyof typeof CATALOGUE>(
  kind: K,
  ...names: Parameters<(typeof CATALOGUE)[K]>
): string {
  const last: string = names.at(-1) ?? "";
  if (last.startsWith("/api/")) return canonicalUri(last);
  const build = CATALOGUE[kind] as (...n: string[]) => string;
  return build(...names.map(encodeURIComponent));
}

/** A list without its terminated objects (unless asked for); `T` is the objects' contract type. */
async function listLive<T extends { state: string }>(
  c: Ctx,
  path: string,
  o: ListOptions,
  query: Query = {},
) {
  return (await c.client.all<T>(path, { ...query, state: o.status, failing: o.failing || undefined })).filter(
    (x) => o.all || o.status === "Terminated" || x.state !== "Terminated",
  );
}

export function registerInfra(program: Command, ctx: (cmd: Command) => Ctx): void {
  const nc = program
    .command("nodecluster")
    .description("node clusters: groups of nodes of one type in one region");
  const cluster = KINDS.nodecluster;
  const clusters = (c: Ctx) => c.client.collection(cluster.prefix, cluster.resource);

  nc.command("ls")
    .description("list node clusters")
    .addOption(quietOption())
    .option("-s, --status <state>", "only clusters in this state")
    .option("-a, --all", "include terminated clusters")
    .addOption(failingOption("a node unreachable, or partly deployed"))
    .action(async (o: ListOptions, cmd: Command) => {
      const c = ctx(cmd);
      const objects = await listLive<NodeCluster>(c, clusters(c), o);
      c.out.list(objects, CLUSTER_COLUMNS);
    });

  nc.command("create <name> <provider> <region> <nodetype>")
    .description(
      "create a node cluster and deploy it (e.g. berth nodecluster create lab local host standard)",
    )
    .option("-t, --target-num-nodes <n>", "number of nodes (default 1)", wholeNumber)
    .option("--disk <gb>", "disk size of each node in GB", wholeNumber)
    .option("--nickname <nickname>", "friendly name")
    .option("--tag <tag>", "tag of the cluster and its nodes (repeatable)", collect)
    .option("--aws-vpc-id <id>", "AWS: network to deploy the nodes in")
    .option("--aws-vpc-subnet <subnet>", "AWS: subnet of that network (repeatable)", collect)
    .option("--aws-vpc-security-group <group>", "AWS: security group (repeatable)", collect)
    .option("--aws-iam-instance-profile-name <name>", "AWS: instance profile of the nodes")
    .option("--no-deploy", "only create it (deploy later with the API)")
    .addOption(syncOption())
    .action(
      async (
        name: string,
        provider: string,
        region: string,
        nodetype: string,
        o: {
          targetNumNodes?: number;
          disk?: number;
          nickname?: string;
          tag?: string[];
          awsVpcId?: string;
          awsVpcSubnet?: string[];
          awsVpcSecurityGroup?: string[];
          awsIamInstanceProfileName?: string;
          deploy: boolean;
          sync?: boolean;
        },
        cmd: Command,
      ) => {
        const c = ctx(cmd);
        const body: NodeClusterCreateBody = {
          name,
          region: catalogueUri("region", provider, region),
          node_type: catalogueUri("nodetype", provider, nodetype),
        };
        if (o.targetNumNodes !== undefined) body.target_num_nodes = o.targetNumNodes;
        if (o.disk !== undefined) body.disk = o.disk;
        if (o.nickname !== undefined) body.nickname = o.nickname;
        if (o.tag) body.tags = o.tag.map((t) => ({ name: t }));
        const options: ProviderOptions = {};
        if (o.awsVpcId || o.awsVpcSubnet || o.awsVpcSecurityGroup) {
          if (!o.awsVpcId)
            throw usageError("--aws-vpc-subnet and --aws-vpc-security-group need --aws-vpc-id");
          options.vpc = {
            id: o.awsVpcId,
            ...(o.awsVpcSubnet ? { subnets: o.awsVpcSubnet } : {}),
            ...(o.awsVpcSecurityGroup ? { security_groups: o.awsVpcSecurityGroup } : {}),
          };
        }
        if (o.awsIamInstanceProfileName) options.iam = { instance_profile_name: o.awsIamInstanceProfileName };
        if (Object.keys(options).length) body.provider_options = options;
        const created = await c.client.request<NodeCluster>("POST", clusters(c), { body });
        if (!o.deploy) return c.out.done(created.body);
        const uri = `${clusters(c)}${created.body.uuid}/`;
        await finish(c, await c.client.request("POST", `${uri}deploy/`), { sync: o.sync, refetch: uri });
      },
    );

  inspect(nc, ctx, cluster);
  nc.command("scale <identifier> <target>")
    .description("scale a node cluster to a number of nodes")
    .addOption(syncOption())
    .action(async (ref: string, target: string, o: { sync?: boolean }, cmd: Command) => {
      if (!/^\d+$/.test(target)) throw usageError(`scale: target must be a whole number, got ${target}`);
      await bulk(ctx(cmd), cluster, [ref], o, (client, n, b) =>
        client.request("PATCH", `${b}${n.uuid}/`, { body: { target_num_nodes: Number(target) } }),
      );
    });
  nc.command("rm <identifier...>")
    .alias("terminate")
    .description("terminate node clusters and their nodes (not reversible)")
    .addOption(syncOption())
    .action((refs: string[], o: { sync?: boolean }, cmd: Command) =>
      bulk(ctx(cmd), cluster, refs, o, (client, n, b) => client.request("DELETE", `${b}${n.uuid}/`)),
    );

  /** The options of the catalogue's lists. */
  interface CatalogueOptions {
    provider?: string;
    region?: string;
  }
  const catalogue = <T extends { name: string }>(
    name: string,
    description: string,
    resource: string,
    columns: Column<T>[],
    filters: (c: Ctx, o: CatalogueOptions) => Query,
    configure: (cmd: Command) => Command = (x) => x,
  ) =>
    configure(nc.command(name).description(description).addOption(quietOption())).action(
      async (o: CatalogueOptions, cmd: Command) => {
        const c = ctx(cmd);
        const objects = await c.client.all<T>(`${API.infra}${resource}/`, filters(c, o));
        c.out.list(objects, columns, (x) => x.name);
      },
    );
  const available = { header: "AVAILABLE", value: (x: { available: boolean }) => str(x.available) };
  catalogue<ProviderView>(
    "provider",
    "list providers",
    "provider",
    [{ header: "NAME", value: (p) => p.name }, { header: "LABEL", value: (p) => p.label }, available],
    () => ({}),
  );
  catalogue<RegionView>(
    "region",
    "list regions",
    "region",
    [
      { header: "NAME", value: (r) => r.name },
      { header: "LABEL", value: (r) => r.label },
      { header: "PROVIDER", value: (r) => lastSegment(r.provider) },
      available,
    ],
    (_c, o) => (o.provider ? { provider: catalogueUri("provider", o.provider) } : {}),
    (cmd) => cmd.option("-p, --provider <provider>", "only regions of this provider"),
  );
  catalogue<NodeTypeView>(
    "nodetype",
    "list node types",
    "nodetype",
    [
      { header: "NAME", value: (t) => t.name },
      { header: "LABEL", value: (t) => t.label },
      { header: "PROVIDER", value: (t) => lastSegment(t.provider) },
      { header: "REGIONS", value: (t) => (t.regions ?? []).map(lastSegment).join(", ") },
      available,
    ],
    (_c, o) => {
      if (!o.region) return {};
      if (!o.provider) throw usageError("nodetype --region needs --provider");
      return { regions: catalogueUri("region", o.provider, o.region) };
    },
    (cmd) =>
      cmd
        .option("-p, --provider <provider>", "only node types of this provider")
        .option("-r, --region <region>", "only node types of this region (with --provider)"),
  );
  catalogue<AzView>(
    "az",
    "list availability zones",
    "az",
    [
      { header: "NAME", value: (z) => z.name },
      { header: "REGION", value: (z) => lastSegment(z.region) },
      available,
    ],
    (_c, o) => (o.provider && o.region ? { region: catalogueUri("region", o.provider, o.region) } : {}),
    (cmd) =>
      cmd
        .option("-p, --provider <provider>", "provider of --region")
        .option("-r, --region <region>", "only zones of this region"),
  );

  // ---- nodes ---------------------------------------------------------------------------------
  const node = program.command("node").description("nodes: the Docker engines containers run on");
  const nodeKind = KINDS.node;
  const nodes = (c: Ctx) => c.client.collection(nodeKind.prefix, nodeKind.resource);

  node
    .command("ls")
    .description("list nodes")
    .addOption(quietOption())
    .option("-s, --status <state>", "only nodes in this state")
    .option("--cluster <cluster>", "only nodes of this node cluster")
    .option("-a, --all", "include terminated nodes")
    .addOption(failingOption("unreachable"))
    .action(async (o: ListOptions & { cluster?: string }, cmd: Command) => {
      const c = ctx(cmd);
      const query: Query = {};
      if (o.cluster) query.node_cluster = (await resolve(c.client, cluster, o.cluster)).resource_uri;
      const objects = await listLive<ListedNode>(c, nodes(c), o, query);
      if (c.out.opts.json) return c.out.json({ meta: { total_count: objects.length }, objects });
      const names = new Map<string, string>();
      for (const n of objects) {
        if (n.node_cluster && !names.has(n.node_cluster)) {
          const found = await c.client.get<NodeCluster>(n.node_cluster).catch(() => undefined);
          names.set(n.node_cluster, found?.name ?? short(lastSegment(n.node_cluster)));
        }
        n.cluster_name = n.node_cluster ? names.get(n.node_cluster) : "";
      }
      c.out.list(objects, NODE_COLUMNS);
    });
  inspect(node, ctx, nodeKind);
  const nodeOp = (verb: string, path: string, description: string) =>
    node
      .command(`${verb} <identifier...>`)
      .description(description)
      .addOption(syncOption())
      .action((refs: string[], o: { sync?: boolean }, cmd: Command) =>
        bulk(ctx(cmd), nodeKind, refs, o, (client, n, b) => client.request("POST", `${b}${n.uuid}/${path}/`)),
      );
  nodeOp("upgrade", "engine-upgrade", "upgrade nodes' Docker engines (restarts their containers)");
  nodeOp("health-check", "health-check", "test that Berth reaches nodes' engines (Deployed or Unreachable)");
  node
    .command("rm <identifier...>")
    .alias("terminate")
    .description("terminate nodes")
    .addOption(syncOption())
    .action((refs: string[], o: { sync?: boolean }, cmd: Command) =>
      bulk(ctx(cmd), nodeKind, refs, o, (client, n, b) => client.request("DELETE", `${b}${n.uuid}/`)),
    );
  registerNodeTokens(node, ctx);
  registerUnknownContainers(node, ctx);
}
