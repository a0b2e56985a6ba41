// The nodes: the list (with the forms that add a node), a table of nodes, and one node (engine
// facts, health-check, engine-upgrade, nickname and tags, terminate, its containers).
import { useState } from "preact/hooks";
import { NODE_OPERATIONS, NODE_STATES } from "../../../../src/domain/states.ts";
import { call, nsPath, query } from "../../api.ts";
import { type Resource, useList, useObject } from "../../live.ts";
import { ObjectLink } from "../../names.tsx";
import { StatsPanel } from "../../stats-panel.tsx";
import { FailingOnly, Pager, SearchBox, Table, useListControls } from "../../table.tsx";
import { HideTerminated, hideTerminated } from "../../terminated.tsx";
import { When } from "../../time.tsx";
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
  Select,
  StateBadge,
  short,
} from "../../ui.tsx";
import { ActionsOf } from "../actions.tsx";
import { AttachEngine, BringYourOwn } from "./node-forms.tsx";
import { type Node, tagList, tagNames } from "./shared.ts";

export function NodeTable({ filter, search }: { filter: Record<string, string>; search?: boolean }) {
  const lc = useListControls();
  const list = useList<Node>(query(nsPath("infra", "node"), { limit: 50, ...filter, ...lc.params }), [
    "node",
  ]);
  const box = search && <SearchBox value={lc.search} onSearch={lc.setSearch} placeholder="name or address" />;
  if (list.error)
    return (
      <>
        {box}
        <FailingOnly />
        <ErrorLine error={list.error} />
      </>
    );
  if (!list.data) return <Loading />;
  return (
    <>
      {box}
      <FailingOnly />
      <Table<Node>
        order={lc.order}
        label="Nodes"
        rows={list.data.objects}
        empty="No nodes."
        columns={[
          {
            label: "Node",
            sort: "name",
            render: (n) => (
              <a href={`#/nodes/${n.uuid}`}>{n.nickname || n.external_fqdn || short(n.resource_uri)}</a>
            ),
          },
          { label: "State", sort: "state", render: (n) => <StateBadge state={n.state} /> },
          { label: "Containers", render: (n) => n.current_num_containers },
          { label: "IP", render: (n) => n.public_ip },
          { label: "Engine", render: (n) => n.engine_version },
          {
            label: "Cluster",
            render: (n) => <ObjectLink uri={n.node_cluster} />,
          },
        ]}
      />
      <Pager offset={lc.offset} limit={50} total={list.data.meta.total_count} go={lc.setOffset} />
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
        <HideTerminated />
      </div>
      <NodeTable
        search
        filter={state ? { state } : hideTerminated.value ? { state__not: "Terminated" } : {}}
      />
      <BringYourOwn />
      <AttachEngine />
    </Page>
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
          ["Region", n.region ? <ObjectLink key="r" uri={n.region} /> : ""],
          ["Node type", n.node_type ? <ObjectLink key="t" uri={n.node_type} /> : ""],
          ["Cluster", n.node_cluster ? <ObjectLink key="c" uri={n.node_cluster} /> : ""],
          [
            "Engine",
            `${n.engine_version} (exec ${n.engine_execdriver || "—"}, storage ${n.engine_graphdriver || "—"})`,
          ],
          ["Size", `${n.cpu} CPU, ${n.memory} MB, ${n.disk} GB`],
          ["Containers", n.current_num_containers],
          ["Last seen", <When key="l" at={n.last_seen} />],
          ["Deployed", <When key="d" at={n.deployed_datetime} />],
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
      <StatsPanel path={url} />
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
