// Node clusters (create from the catalogue: provider → region → node type, with the provider's
// own options and disk rules; deploy, scale, tags, terminate) and nodes (engine facts,
// health-check, engine-upgrade, nickname and tags, terminate).

import { useEffect, useState } from "preact/hooks";
import type { NodeTypeView, ProviderView, RegionView } from "../../../src/contract/catalogue.ts";
import type { NodeCluster, Node as NodeView } from "../../../src/contract/nodes.ts";
import {
  CLUSTER_OPERATIONS,
  CLUSTER_STATES,
  NODE_OPERATIONS,
  NODE_STATES,
} from "../../../src/domain/states.ts";
import { call, get, type ListPage, nsPath, query, uuidOf } from "../api.ts";
import { type Resource, useList, useObject } from "../live.ts";
import { navigate } from "../router.ts";
import {
  ErrorLine,
  Facts,
  Field,
  gate,
  inputValue,
  Loading,
  notify,
  Op,
  Page,
  PagedTable,
  Pager,
  Select,
  StateBadge,
  StateFilter,
  short,
  Table,
  uriTail,
} from "../ui.tsx";
import { ActionsOf } from "./actions.tsx";

type Cluster = NodeCluster & Resource;
type Node = NodeView & Resource;
type Provider = ProviderView;
type Region = RegionView;
type NodeType = NodeTypeView;

const tagNames = (tags: { name: string }[]) => tags.map((t) => t.name).join(", ");
const tagList = (text: string) =>
  text
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean)
    .map((name) => ({ name }));

export function ClusterList() {
  const [offset, setOffset] = useState(0);
  const [state, setState] = useState("");
  const list = useList<Cluster>(query(nsPath("infra", "nodecluster"), { limit: 50, offset, state }), [
    "nodecluster",
  ]);
  return (
    <Page
      title="Node clusters"
      actions={
        <a class="button primary" href="#/nodeclusters/new">
          Create node cluster
        </a>
      }
    >
      <div class="filters">
        <StateFilter
          value={state}
          states={CLUSTER_STATES}
          onChange={(v) => {
            setState(v);
            setOffset(0);
          }}
        />
      </div>
      <PagedTable<Cluster>
        list={list}
        offset={offset}
        limit={50}
        go={setOffset}
        label="Node clusters"
        empty="No node clusters yet."
        columns={[
          {
            label: "Name",
            render: (c) => <a href={`#/nodeclusters/${c.uuid}`}>{c.nickname || c.name}</a>,
          },
          { label: "State", render: (c) => <StateBadge state={c.state} /> },
          { label: "Nodes", render: (c) => `${c.current_num_nodes} / ${c.target_num_nodes}` },
          { label: "Region", render: (c) => c.region.split("/").filter(Boolean).slice(-2).join("/") },
          { label: "Node type", render: (c) => uriTail(c.node_type) },
        ]}
      />
    </Page>
  );
}

export function ClusterCreate() {
  const [providers, setProviders] = useState<Provider[]>([]);
  const [regions, setRegions] = useState<Region[]>([]);
  const [types, setTypes] = useState<NodeType[]>([]);
  const [provider, setProvider] = useState("");
  const [region, setRegion] = useState("");
  const [nodeType, setNodeType] = useState("");
  const [name, setName] = useState("");
  const [count, setCount] = useState("1");
  const [disk, setDisk] = useState("");
  const [tags, setTags] = useState("");
  const [vpcId, setVpcId] = useState("");
  const [subnets, setSubnets] = useState("");
  const [groups, setGroups] = useState("");
  const [profile, setProfile] = useState("");
  const [deployNow, setDeployNow] = useState(true);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    get<ListPage<Provider>>("/api/infra/v1/provider/?limit=100").then(
      (p) => setProviders(p.objects),
      setError,
    );
  }, []);
  useEffect(() => {
    setRegion("");
    setRegions([]);
    if (!provider) return;
    get<ListPage<Region>>(query("/api/infra/v1/region/", { provider, limit: 100 })).then(
      (r) => setRegions(r.objects),
      setError,
    );
  }, [provider]);
  useEffect(() => {
    setNodeType("");
    setTypes([]);
    if (!region) return;
    get<ListPage<NodeType>>(query("/api/infra/v1/nodetype/", { regions: region, limit: 100 })).then(
      (t) => setTypes(t.objects),
      setError,
    );
  }, [region]);

  const rules = providers.find((p) => p.resource_uri === provider)?.node_cluster_rules;
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setBusy(true);
    try {
      const body: Record<string, unknown> = {
        name: name.trim(),
        region,
        node_type: nodeType,
        target_num_nodes: Number(count),
        tags: tagList(tags),
      };
      if (rules?.disk !== "none" && disk) body.disk = Number(disk);
      if (rules?.provider_options) {
        const po: Record<string, unknown> = {};
        if (vpcId.trim()) {
          const list = (s: string) =>
            s
              .split(",")
              .map((x) => x.trim())
              .filter(Boolean);
          po.vpc = {
            id: vpcId.trim(),
            ...(subnets ? { subnets: list(subnets) } : {}),
            ...(groups ? { security_groups: list(groups) } : {}),
          };
        }
        if (profile.trim()) po.iam = { instance_profile_name: profile.trim() };
        if (Object.keys(po).length) body.provider_options = po;
      }
      const r = await call<Cluster>("POST", nsPath("infra", "nodecluster"), body);
      notify({ kind: "ok", text: `Node cluster ${r.data.name} created.`, actionUri: r.actionUri });
      if (deployNow) {
        const d = await call("POST", `${r.data.resource_uri}deploy/`);
        notify({ kind: "ok", text: `Deploying ${r.data.name}.`, actionUri: d.actionUri });
      }
      navigate(`/nodeclusters/${r.data.uuid}`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <Page title="Create a node cluster">
      <form class="form" onSubmit={(e) => void submit(e)}>
        <div class="grid">
          <Field label="Name">
            <input name="cluster-name" required value={name} onInput={(e) => setName(inputValue(e))} />
          </Field>
          <Field label="Provider">
            <Select
              name="provider"
              value={provider}
              onChange={setProvider}
              options={[
                { value: "", label: "choose a provider…" },
                ...providers.map((p) => ({ value: p.resource_uri, label: p.label, disabled: !p.available })),
              ]}
            />
          </Field>
          <Field label="Region">
            <Select
              name="region"
              value={region}
              onChange={setRegion}
              options={[
                { value: "", label: provider ? "choose a region…" : "choose a provider first" },
                ...regions.map((r) => ({
                  value: r.resource_uri,
                  label: r.label || r.name,
                  disabled: !r.available,
                })),
              ]}
            />
          </Field>
          <Field label="Node type">
            <Select
              name="node_type"
              value={nodeType}
              onChange={setNodeType}
              options={[
                { value: "", label: region ? "choose a node type…" : "choose a region first" },
                ...types.map((t) => ({
                  value: t.resource_uri,
                  label: t.label || t.name,
                  disabled: !t.available,
                })),
              ]}
            />
          </Field>
          <Field label="Nodes">
            <input
              name="target_num_nodes"
              type="number"
              min={1}
              value={count}
              onInput={(e) => setCount(inputValue(e))}
            />
          </Field>
          {rules?.disk === "any" && (
            <Field label="Disk (GB)" hint="default 60">
              <input type="number" min={1} value={disk} onInput={(e) => setDisk(inputValue(e))} />
            </Field>
          )}
          {rules?.disk === "fixed" && (
            <Field label="Disk (GB)" hint="this provider offers these sizes only">
              <Select
                value={disk}
                onChange={setDisk}
                options={[{ value: "", label: "default (60)" }, ...rules.disk_sizes.map(String)]}
              />
            </Field>
          )}
          {rules?.disk === "none" && (
            <Field label="Disk">
              <span class="hint">This provider sets the disk size itself.</span>
            </Field>
          )}
          <Field label="Tags" hint="comma-separated">
            <input value={tags} onInput={(e) => setTags(inputValue(e))} />
          </Field>
        </div>
        {rules?.provider_options && (
          <fieldset>
            <legend>Provider options</legend>
            <div class="grid">
              <Field label="VPC id">
                <input value={vpcId} onInput={(e) => setVpcId(inputValue(e))} />
              </Field>
              <Field label="Subnets" hint="comma-separated; nodes are balanced among them">
                <input value={subnets} onInput={(e) => setSubnets(inputValue(e))} />
              </Field>
              <Field label="Security groups" hint="comma-separated">
                <input value={groups} onInput={(e) => setGroups(inputValue(e))} />
              </Field>
              <Field label="IAM instance profile">
                <input value={profile} onInput={(e) => setProfile(inputValue(e))} />
              </Field>
            </div>
          </fieldset>
        )}
        <div class="checks">
          <label>
            <input
              type="checkbox"
              checked={deployNow}
              onChange={(e) => setDeployNow((e.target as HTMLInputElement).checked)}
            />{" "}
            Deploy it now
          </label>
        </div>
        <ErrorLine error={error} />
        <div class="form-actions">
          <button type="submit" class="primary" disabled={busy || !region || !nodeType}>
            Create
          </button>
        </div>
      </form>
    </Page>
  );
}

export function ClusterDetail({ uuid }: { uuid: string }) {
  const url = `${nsPath("infra", "nodecluster")}${uuid}/`;
  const { data: c, error } = useObject<Cluster>(url);
  const [target, setTarget] = useState("");
  const [tags, setTags] = useState<string | undefined>(undefined);
  if (error) return <ErrorLine error={error} />;
  if (!c) return <Loading />;
  const g = (op: string) => gate(CLUSTER_OPERATIONS, op, c.state, `node cluster ${c.name}`);
  return (
    <Page title={`Node cluster ${c.nickname || c.name}`}>
      <div class="ops">
        <StateBadge state={c.state} />
        <Op label="Deploy" allowed={g("deploy")} run={() => call("POST", `${url}deploy/`)} />
        <span class="op-group">
          <label>
            Nodes{" "}
            <input
              type="number"
              class="narrow"
              min={0}
              value={target === "" ? c.target_num_nodes : target}
              onInput={(e) => setTarget(inputValue(e))}
            />
          </label>
          <Op
            label="Scale"
            allowed={g("scale")}
            run={() =>
              call("PATCH", url, { target_num_nodes: Number(target === "" ? c.target_num_nodes : target) })
            }
          />
        </span>
        <Op
          label="Terminate"
          danger
          allowed={g("terminate")}
          confirm={`Terminate node cluster ${c.name} and all its nodes? This cannot be undone.`}
          run={() => call("DELETE", url)}
        />
      </div>
      <Facts
        items={[
          ["Nodes", `${c.current_num_nodes} deployed, target ${c.target_num_nodes}`],
          ["Region", c.region],
          ["Node type", c.node_type],
          ["Disk", c.disk === null ? "" : `${c.disk} GB`],
          ["Provider options", c.provider_options ? JSON.stringify(c.provider_options) : ""],
          ["Deployed", c.deployed_datetime],
        ]}
      />
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void call("PATCH", url, { tags: tagList(tags ?? tagNames(c.tags)) }).then(
            (r) =>
              notify({
                kind: "ok",
                text: "Tags replaced on the cluster and its nodes.",
                actionUri: r.actionUri,
              }),
            (err: unknown) =>
              notify({ kind: "error", text: `Tags: ${err instanceof Error ? err.message : String(err)}` }),
          );
        }}
      >
        <Field label="Tags" hint="comma-separated; replaces the list on the cluster and its nodes">
          <input value={tags ?? tagNames(c.tags)} onInput={(e) => setTags(inputValue(e))} />
        </Field>
        <button type="submit">Save tags</button>
      </form>
      <ActionsOf objectUri={c.resource_uri} />
      <h2>Nodes</h2>
      <NodeTable filter={{ node_cluster: c.resource_uri }} />
    </Page>
  );
}

function NodeTable({ filter }: { filter: Record<string, string> }) {
  const [offset, setOffset] = useState(0);
  const list = useList<Node>(query(nsPath("infra", "node"), { limit: 50, offset, ...filter }), ["node"]);
  if (list.error) return <ErrorLine error={list.error} />;
  if (!list.data) return <Loading />;
  return (
    <>
      <Table<Node>
        label="Nodes"
        rows={list.data.objects}
        empty="No nodes."
        columns={[
          {
            label: "Node",
            render: (n) => (
              <a href={`#/nodes/${n.uuid}`}>{n.nickname || n.external_fqdn || short(n.resource_uri)}</a>
            ),
          },
          { label: "State", render: (n) => <StateBadge state={n.state} /> },
          { label: "Containers", render: (n) => n.current_num_containers },
          { label: "IP", render: (n) => n.public_ip },
          { label: "Engine", render: (n) => n.engine_version },
          {
            label: "Cluster",
            render: (n) =>
              n.node_cluster ? (
                <a href={`#/nodeclusters/${uuidOf(n.node_cluster)}`}>{short(n.node_cluster)}</a>
              ) : (
                ""
              ),
          },
        ]}
      />
      <Pager offset={offset} limit={50} total={list.data.meta.total_count} go={setOffset} />
    </>
  );
}

export function NodeList() {
  const [state, setState] = useState("");
  return (
    <Page title="Nodes">
      <div class="filters">
        <label>
          State{" "}
          <Select value={state} onChange={setState} options={[{ value: "", label: "any" }, ...NODE_STATES]} />
        </label>
      </div>
      <NodeTable filter={state ? { state } : {}} />
      <BringYourOwn />
      <AttachEngine />
    </Page>
  );
}

/**
 * A registration token for a server of one's own (issue 15): the command to run there, shown once
 * (the token is stored hashed), and the tokens not used yet, which can be revoked.
 */
function BringYourOwn() {
  const tokens = useList<{
    uuid: string;
    resource_uri: string;
    created: string;
    created_by: string;
    expires: string;
  }>(query(nsPath("infra", "token"), { limit: 50 }), []);
  const [command, setCommand] = useState<string | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const create = async () => {
    setError(undefined);
    try {
      const r = await call<{ command: string }>("POST", nsPath("infra", "token"));
      setCommand(r.data.command);
      tokens.reload();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section class="form">
      <h2>Bring your own server</h2>
      <p>
        Run the command on a server with Docker: the Berth agent registers it as a node of this namespace and
        keeps an outbound tunnel, so the server needs no open port. A token works once.
      </p>
      <div class="form-actions">
        <button type="button" class="primary" onClick={() => void create()}>
          Create a registration command
        </button>
      </div>
      <ErrorLine error={error} />
      {command && (
        <>
          <p>Shown once; run it on the server:</p>
          <figure aria-label="Registration command">
            <pre class="code">{command}</pre>
          </figure>
        </>
      )}
      {tokens.data && tokens.data.objects.length > 0 && (
        <Table
          label="Unused registration tokens"
          rows={tokens.data.objects}
          empty="No unused tokens."
          columns={[
            { label: "Token", render: (t) => t.uuid.slice(0, 8) },
            { label: "By", render: (t) => t.created_by },
            { label: "Created", render: (t) => t.created },
            { label: "Expires", render: (t) => t.expires },
            {
              label: "",
              render: (t) => (
                <Op
                  label="Revoke"
                  danger
                  confirm="Revoke this registration token? A server not yet registered with it cannot use it."
                  run={() => call("DELETE", t.resource_uri)}
                  done={() => tokens.reload()}
                />
              ),
            },
          ]}
        />
      )}
    </section>
  );
}

/** Attaching a Docker engine Berth can reach (tcp with TLS, or a local socket): admins, or users where allowed. */
function AttachEngine() {
  const [engineUrl, setEngineUrl] = useState("");
  const [nickname, setNickname] = useState("");
  const [tags, setTags] = useState("");
  const [tls, setTls] = useState({ ca: "", cert: "", key: "" });
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setBusy(true);
    try {
      const body: Record<string, unknown> = { engine_url: engineUrl.trim(), tags: tagList(tags) };
      if (nickname.trim()) body.nickname = nickname.trim();
      if (tls.ca || tls.cert || tls.key) body.tls = tls;
      const r = await call<Node>("POST", nsPath("infra", "node"), body);
      notify({ kind: "ok", text: "Engine attached; Berth is checking it.", actionUri: r.actionUri });
      navigate(`/nodes/${r.data.uuid}`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const pem = (part: keyof typeof tls, label: string) => (
    <Field label={label} hint="PEM, for tcp:// engines with TLS">
      <textarea
        class="code"
        rows={3}
        value={tls[part]}
        onInput={(e) => setTls({ ...tls, [part]: inputValue(e) })}
      />
    </Field>
  );
  return (
    <form class="form" onSubmit={(e) => void submit(e)}>
      <h2>Attach a Docker engine</h2>
      <div class="grid">
        <Field label="Engine URL" hint="tcp://host:2376 or unix:///var/run/docker.sock">
          <input name="engine_url" required value={engineUrl} onInput={(e) => setEngineUrl(inputValue(e))} />
        </Field>
        <Field label="Nickname">
          <input value={nickname} onInput={(e) => setNickname(inputValue(e))} />
        </Field>
        <Field label="Tags" hint="comma-separated">
          <input value={tags} onInput={(e) => setTags(inputValue(e))} />
        </Field>
        {pem("ca", "TLS CA certificate")}
        {pem("cert", "TLS client certificate")}
        {pem("key", "TLS client key")}
      </div>
      <ErrorLine error={error} />
      <div class="form-actions">
        <button type="submit" class="primary" disabled={busy}>
          Attach engine
        </button>
      </div>
    </form>
  );
}

export function NodeDetail({ uuid }: { uuid: string }) {
  const url = `${nsPath("infra", "node")}${uuid}/`;
  const { data: n, error } = useObject<Node>(url);
  const [nickname, setNickname] = useState<string | undefined>(undefined);
  const [tags, setTags] = useState<string | undefined>(undefined);
  if (error) return <ErrorLine error={error} />;
  if (!n) return <Loading />;
  const g = (op: string) => gate(NODE_OPERATIONS, op, n.state, `node ${n.nickname || n.uuid}`);
  return (
    <Page title={`Node ${n.nickname || n.external_fqdn}`}>
      <div class="ops">
        <StateBadge state={n.state} />
        <Op
          label="Health check"
          allowed={g("health-check")}
          run={() => call("POST", `${url}health-check/`)}
        />
        <Op
          label="Upgrade engine"
          allowed={g("engine-upgrade")}
          confirm="Upgrade the engine? Containers on this node restart."
          run={() => call("POST", `${url}engine-upgrade/`)}
        />
        <Op
          label="Terminate"
          danger
          allowed={g("terminate")}
          confirm="Terminate this node?"
          run={() => call("DELETE", url)}
        />
      </div>
      <Facts
        items={[
          ["FQDN", n.external_fqdn],
          ["Public IP", n.public_ip],
          [
            "Cluster",
            n.node_cluster ? (
              <a href={`#/nodeclusters/${uuidOf(n.node_cluster)}`}>{short(n.node_cluster)}</a>
            ) : (
              ""
            ),
          ],
          [
            "Engine",
            `${n.engine_version} (exec ${n.engine_execdriver || "—"}, storage ${n.engine_graphdriver || "—"})`,
          ],
          ["Size", `${n.cpu} CPU, ${n.memory} MB, ${n.disk} GB`],
          ["Containers", n.current_num_containers],
          ["Last seen", n.last_seen],
          ["Deployed", n.deployed_datetime],
        ]}
      />
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          const body: Record<string, unknown> = {};
          if (nickname !== undefined) body.nickname = nickname;
          if (tags !== undefined) body.tags = tagList(tags);
          void call("PATCH", url, body).then(
            (r) => notify({ kind: "ok", text: "Node updated.", actionUri: r.actionUri }),
            (err: unknown) =>
              notify({ kind: "error", text: `Node: ${err instanceof Error ? err.message : String(err)}` }),
          );
        }}
      >
        <Field label="Nickname">
          <input value={nickname ?? n.nickname} onInput={(e) => setNickname(inputValue(e))} />
        </Field>
        <Field label="Tags" hint="comma-separated; replaces the list">
          <input value={tags ?? tagNames(n.tags)} onInput={(e) => setTags(inputValue(e))} />
        </Field>
        <button type="submit">Save</button>
      </form>
      <ActionsOf objectUri={n.resource_uri} />
      <NodeContainers nodeUri={n.resource_uri} />
    </Page>
  );
}

function NodeContainers({ nodeUri }: { nodeUri: string }) {
  const list = useList<Resource & { uuid: string; name: string; image_name: string }>(
    query(nsPath("app", "container"), { node: nodeUri, limit: 100 }),
    ["container"],
  );
  if (!list.data) return null;
  return (
    <>
      <h2>Containers on this node</h2>
      <Table
        label="Containers on the node"
        rows={list.data.objects}
        empty="None."
        columns={[
          { label: "Name", render: (c) => <a href={`#/containers/${c.uuid}`}>{c.name}</a> },
          { label: "State", render: (c) => <StateBadge state={c.state} /> },
          { label: "Image", render: (c) => c.image_name },
        ]}
      />
    </>
  );
}
