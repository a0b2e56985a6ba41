// Containers: the list (server pagination, filters) and one container with its logs and a terminal.

import { useState } from "preact/hooks";
import type { Container as ContainerView } from "../../../src/contract/container.ts";
import { CONTAINER_OPERATIONS, CONTAINER_STATES } from "../../../src/domain/states.ts";
import { nsPath, query } from "../api.ts";
import { BulkBar, useSelection } from "../bulk.tsx";
import { ContainerState, CrashPanel, crashed, type ExitFacts } from "../crash.tsx";
import { type Resource, useList, useObject } from "../live.ts";
import { LogView } from "../logs.tsx";
import { ObjectLink } from "../names.tsx";
import { StatsPanel } from "../stats-panel.tsx";
import { PagedTable, SearchBox, StateFilter, useListControls } from "../table.tsx";
import { Terminal } from "../terminal.tsx";
import { HideTerminated, stateNot } from "../terminated.tsx";
import { When } from "../time.tsx";
import { ErrorLine, Facts, LifecycleOps, Loading, Page } from "../ui.tsx";
import { ActionsOf } from "./actions.tsx";

type Container = ContainerView & Resource;

const PAGE = 100;

export function ContainerList() {
  const [state, setState] = useState("");
  const lc = useListControls();
  const selection = useSelection();
  const list = useList<Container>(
    query(nsPath("app", "container"), {
      limit: PAGE,
      state,
      state__not: stateNot(state),
      ...lc.params,
    }),
    ["container"],
  );
  return (
    <Page title="Containers">
      <div class="filters">
        <SearchBox value={lc.search} onSearch={lc.setSearch} placeholder="web-1" />
        <StateFilter
          value={state}
          states={CONTAINER_STATES}
          onChange={(v) => {
            setState(v);
            lc.setOffset(0);
          }}
        />
        <HideTerminated onChange={() => lc.setOffset(0)} />
      </div>
      <BulkBar
        selection={selection}
        stateOf={(u) => list.data?.objects.find((o) => o.resource_uri === u)?.state}
        table={CONTAINER_OPERATIONS}
        what="containers"
      />
      <PagedTable<Container>
        selection={selection}
        list={list}
        offset={lc.offset}
        limit={PAGE}
        go={lc.setOffset}
        order={lc.order}
        label="Containers"
        empty="No containers."
        columns={[
          { label: "Name", sort: "name", render: (c) => <a href={`#/containers/${c.uuid}`}>{c.name}</a> },
          { label: "State", sort: "state", render: (c) => <ContainerState c={c} /> },
          { label: "Image", render: (c) => c.image_name },
          {
            label: "Service",
            render: (c) => <ObjectLink uri={c.service} />,
          },
          {
            label: "Node",
            render: (c) => <ObjectLink uri={c.node} />,
          },
          { label: "Health", render: (c) => (c.health === "none" ? "" : c.health) },
          { label: "Restarts", render: (c) => c.restart_count },
          { label: "IP", render: (c) => c.private_ip },
        ]}
      />
    </Page>
  );
}

export function ContainerDetail({ uuid }: { uuid: string }) {
  const url = `${nsPath("app", "container")}${uuid}/`;
  const { data: c, error } = useObject<Container>(url);
  if (error) return <ErrorLine error={error} />;
  if (!c) return <Loading />;
  return (
    <Page title={`Container ${c.name}`}>
      <LifecycleOps
        url={url}
        state={c.state}
        what={`container ${c.name}`}
        table={CONTAINER_OPERATIONS}
        terminateWarning="Its data is deleted."
        badge={<ContainerState c={c} />}
      />
      {crashed(c) && <CrashPanel c={c} logsPath={`${url}logs/`} />}
      <Facts
        items={[
          ["Image", c.image_name],
          ["Service", c.service ? <ObjectLink key="s" uri={c.service} /> : ""],
          ["Node", c.node ? <ObjectLink key="n" uri={c.node} /> : ""],
          ["Private IP", c.private_ip],
          ["Public DNS", c.public_dns],
          [
            "Endpoints",
            c.container_ports.map((p) => p.endpoint_uri ?? `${p.inner_port}/${p.protocol}`).join(", "),
          ],
          ["Exit code", c.exit_code === null ? "" : `${c.exit_code} ${c.exit_code_msg ?? ""}`],
          ["Health", (c as ExitFacts).health ?? ""],
          ["Restarts", String(c.restart_count)],
          ["Synchronized", c.synchronized ? "yes" : "no"],
          ["Started", <When key="s" at={c.started_datetime} />],
        ]}
      />
      <StatsPanel path={url} />
      <ActionsOf objectUri={c.resource_uri} />
      <LogView key={url} streamPath={`${url}logs/`} title="Container logs" />
      {c.state === "Running" ? (
        <Terminal key={url} execPath={`${url}exec/`} />
      ) : (
        <p class="hint">The terminal opens on a running container.</p>
      )}
    </Page>
  );
}
