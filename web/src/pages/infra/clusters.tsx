// The node clusters: the list, and one cluster (deploy, scale, tags, terminate, its nodes).
import { useState } from "preact/hooks";
import { CLUSTER_OPERATIONS, CLUSTER_STATES } from "../../../../src/domain/states.ts";
import { call, nsPath, query } from "../../api.ts";
import { useList, useObject } from "../../live.ts";
import { ObjectLink } from "../../names.tsx";
import { PagedTable, SearchBox, StateFilter, useListControls } from "../../table.tsx";
import { HideTerminated, stateNot } from "../../terminated.tsx";
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
  StateBadge,
} from "../../ui.tsx";
import { ActionsOf } from "../actions.tsx";
import { NodeTable } from "./nodes.tsx";
import { type Cluster, tagList, tagNames } from "./shared.ts";

export function ClusterList() {
  const [state, setState] = useState("");
  const lc = useListControls();
  const list = useList<Cluster>(
    query(nsPath("infra", "nodecluster"), { limit: 50, state, state__not: stateNot(state), ...lc.params }),
    ["nodecluster"],
  );
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
        <SearchBox value={lc.search} onSearch={lc.setSearch} />
        <StateFilter
          value={state}
          states={CLUSTER_STATES}
          onChange={(v) => {
            setState(v);
            lc.setOffset(0);
          }}
        />
        <HideTerminated onChange={() => lc.setOffset(0)} />
      </div>
      <PagedTable<Cluster>
        list={list}
        offset={lc.offset}
        limit={50}
        go={lc.setOffset}
        order={lc.order}
        label="Node clusters"
        empty="No node clusters yet."
        columns={[
          {
            label: "Name",
            sort: "name",
            render: (c) => <a href={`#/nodeclusters/${c.uuid}`}>{c.nickname || c.name}</a>,
          },
          { label: "State", sort: "state", render: (c) => <StateBadge state={c.state} /> },
          { label: "Nodes", render: (c) => `${c.current_num_nodes} / ${c.target_num_nodes}` },
          { label: "Region", render: (c) => <ObjectLink uri={c.region} /> },
          { label: "Node type", render: (c) => <ObjectLink uri={c.node_type} /> },
        ]}
      />
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
          ["Region", <ObjectLink key="r" uri={c.region} />],
          ["Node type", <ObjectLink key="t" uri={c.node_type} />],
          ["Disk", c.disk === null ? "" : `${c.disk} GB`],
          ["Provider options", c.provider_options ? JSON.stringify(c.provider_options) : ""],
          ["Deployed", <When key="d" at={c.deployed_datetime} />],
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
