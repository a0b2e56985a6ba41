// Services: the list, one service (operations, containers, logs, triggers), create and edit.

import { useState } from "preact/hooks";
import { SERVICE_OPERATIONS, SERVICE_STATES } from "../../../src/domain/states.ts";
import { call, type ListPage, nsPath, query, uuidOf } from "../api.ts";
import { BulkBar, useSelection } from "../bulk.tsx";
import { ContainerState, CrashPanel, crashed, type ExitFacts, unhealthy } from "../crash.tsx";
import { type Loaded, type Resource, useList, useObject } from "../live.ts";
import { LogView } from "../logs.tsx";
import { ObjectLink } from "../names.tsx";
import { navigate } from "../router.ts";
import { StatsPanel } from "../stats-panel.tsx";
import { PagedTable, SearchBox, StateFilter, Table, useListControls } from "../table.tsx";
import { HideTerminated, stateNot } from "../terminated.tsx";
import { When } from "../time.tsx";
import { ErrorLine, Facts, gate, LifecycleOps, Loading, Page, StateBadge } from "../ui.tsx";
import { ActionsOf } from "./actions.tsx";
import { ScaleControl } from "./scale.tsx";
import { Domains } from "./service-domains.tsx";
import { ServiceForm } from "./service-form.tsx";
import type { Service } from "./service-model.ts";
import { Revisions } from "./service-revisions.tsx";
import { Triggers } from "./triggers.tsx";

const PAGE = 50;

export function ServiceList() {
  const [state, setState] = useState("");
  const lc = useListControls();
  const selection = useSelection();
  const list = useList<Service>(
    query(nsPath("app", "service"), { limit: PAGE, state, state__not: stateNot(state), ...lc.params }),
    ["service"],
  );
  return (
    <Page
      title="Services"
      actions={
        <a class="button primary" href="#/services/new">
          Create service
        </a>
      }
    >
      <div class="filters">
        <SearchBox value={lc.search} onSearch={lc.setSearch} placeholder="web" />
        <StateFilter
          value={state}
          states={SERVICE_STATES}
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
        table={SERVICE_OPERATIONS}
        what="services"
      />
      <PagedTable<Service>
        selection={selection}
        list={list}
        offset={lc.offset}
        limit={PAGE}
        go={lc.setOffset}
        order={lc.order}
        label="Services"
        empty="No services in this namespace yet."
        columns={[
          {
            label: "Name",
            sort: "name",
            render: (s) => <a href={`#/services/${s.uuid}`}>{s.nickname || s.name}</a>,
          },
          { label: "State", sort: "state", render: (s) => <StateBadge state={s.state} /> },
          { label: "Image", render: (s) => s.image_name },
          {
            label: "Containers",
            render: (s) => `${s.running_num_containers} running / ${s.target_num_containers}`,
          },
          { label: "Health", render: (s) => (s.health === "none" ? "" : s.health) },
          { label: "Restarts", render: (s) => s.restart_count },
          {
            label: "Stack",
            render: (s) => <ObjectLink uri={s.stack} />,
          },
        ]}
      />
    </Page>
  );
}

export function ServiceDetail({ uuid }: { uuid: string }) {
  const url = `${nsPath("app", "service")}${uuid}/`;
  const { data: s, error } = useObject<Service>(url);
  const containers = useList<ServiceContainer>(
    query(nsPath("app", "container"), { service: url, limit: 100 }),
    ["container"],
  );
  if (error) return <ErrorLine error={error} />;
  if (!s) return <Loading />;
  const what = `service ${s.name}`;
  const failed = (containers.data?.objects ?? []).filter(crashed);
  const g = (op: string) => gate(SERVICE_OPERATIONS, op, s.state, what);
  return (
    <Page
      title={`Service ${s.nickname || s.name}`}
      actions={
        <a
          class="button"
          href={`#/services/${uuid}/edit`}
          aria-disabled={!g("update").allowed}
          title={g("update").reason || undefined}
        >
          Edit
        </a>
      }
    >
      <LifecycleOps
        url={url}
        state={s.state}
        what={what}
        table={SERVICE_OPERATIONS}
        terminateWarning="All its containers and their data are deleted."
        badge={
          <StateBadge
            state={s.state}
            bad={
              (failed.length > 0 && s.state !== "Running") || (containers.data?.objects ?? []).some(unhealthy)
            }
          />
        }
      >
        <ScaleControl url={url} current={s.target_num_containers} allowed={g("scale")} />
      </LifecycleOps>
      {failed[0] && (
        <CrashPanel
          c={failed[0]}
          logsPath={`${nsPath("app", "container")}${failed[0].uuid}/logs/`}
          link={`#/containers/${failed[0].uuid}`}
        />
      )}
      <Facts
        items={[
          ["Image", s.image_name],
          [
            "Containers",
            `${s.running_num_containers} running, ${s.current_num_containers} deployed, target ${s.target_num_containers}`,
          ],
          ["Strategy", s.deployment_strategy],
          ["Stack", s.stack ? <ObjectLink key="st" uri={s.stack} /> : ""],
          ["Public DNS", s.public_dns],
          ["Synchronized", s.synchronized ? "yes" : "no (redeploy to apply the definition)"],
          [
            "Health check",
            s.health_check
              ? `${s.health_check.type}${s.health_check.port ? ` :${s.health_check.port}${s.health_check.path ?? ""}` : ""}`
              : "the image's, if any",
          ],
          [
            "Redeploys",
            s.rollout
              ? `${s.rollout.order}, ${s.rollout.order === "start-first" ? `${s.rollout.max_surge} extra` : `${s.rollout.max_unavailable} down`} at a time, on failure ${s.rollout.failure_action}`
              : "every container at once",
          ],
          ["Autorestart / autodestroy", `${s.autorestart} / ${s.autodestroy}`],
          ["Autoredeploy", s.autoredeploy ? "on" : "off"],
          ["Roles", s.roles.join(", ")],
          [
            "Ports",
            s.container_ports
              .map((p) => `${p.inner_port}/${p.protocol}${p.published ? ` → ${p.outer_port ?? "any"}` : ""}`)
              .join(", "),
          ],
          [
            "Links",
            s.linked_to_service.length ? (
              <span key="l" class="links">
                {s.linked_to_service.map((l) => (
                  <span key={l.name}>
                    {l.name} → <ObjectLink uri={l.to_service} />{" "}
                  </span>
                ))}
              </span>
            ) : (
              ""
            ),
          ],
          ["Tags", s.tags.map((t) => t.name).join(", ")],
          ["Deployed", <When key="d" at={s.deployed_datetime} />],
        ]}
      />
      <StatsPanel path={url} />
      <Domains service={s} url={url} />
      <Revisions service={s} url={url} />
      <ActionsOf objectUri={s.resource_uri} />
      <h2>Containers</h2>
      <ContainersOf list={containers} />
      <Triggers serviceUrl={url} />
      <LogView key={url} streamPath={`${url}logs/`} title="Service logs" />
    </Page>
  );
}

type ServiceContainer = Resource &
  ExitFacts & { uuid: string; name: string; node: string; private_ip: string; restart_count: number };

function ContainersOf({ list }: { list: Loaded<ListPage<ServiceContainer>> }) {
  if (!list.data) return <Loading />;
  return (
    <Table
      label="Containers of the service"
      rows={list.data.objects}
      empty="No containers: start the service."
      columns={[
        { label: "Name", render: (c) => <a href={`#/containers/${c.uuid}`}>{c.name}</a> },
        { label: "State", render: (c) => <ContainerState c={c} /> },
        {
          label: "Node",
          render: (c) => <ObjectLink uri={c.node} />,
        },
        { label: "Private IP", render: (c) => c.private_ip },
        { label: "Restarts", render: (c) => c.restart_count },
      ]}
    />
  );
}

export function ServiceCreate() {
  return (
    <Page title="Create a service">
      <ServiceForm
        onSaved={(uri) => navigate(`/services/${uuidOf(uri)}`)}
        submit={(body) => call<Service>("POST", nsPath("app", "service"), body)}
      />
    </Page>
  );
}

export function ServiceEdit({ uuid }: { uuid: string }) {
  const url = `${nsPath("app", "service")}${uuid}/`;
  const { data: s, error } = useObject<Service>(url);
  if (error) return <ErrorLine error={error} />;
  if (!s) return <Loading />;
  return (
    <Page title={`Edit service ${s.name}`}>
      <ServiceForm
        initial={s}
        onSaved={() => navigate(`/services/${uuid}`)}
        submit={(body) => call<Service>("PATCH", url, body)}
      />
    </Page>
  );
}
