// The service page's Revisions (issue 29): the definitions the service keeps, newest first, what
// changed in each, what made it, and a Roll back button on each other one, confirmed first and
// reported as every operation is (the action to follow, or the API's refusal).
import type { Revision } from "../../../src/contract/revisions.ts";
import { SERVICE_OPERATIONS } from "../../../src/domain/states.ts";
import { call, query, uuidOf } from "../api.ts";
import { type Resource, useList } from "../live.ts";
import { Table } from "../table.tsx";
import { When } from "../time.tsx";
import { ErrorLine, gate, Loading, Op } from "../ui.tsx";
import type { Service } from "./service-model.ts";

type Row = Revision & Resource;

/** The fields of a revision's definition that differ from the next older one. */
function changes(r: Revision, older: Revision | undefined): string {
  if (!older) return "first kept";
  const d = r.definition as Record<string, unknown>;
  const o = older.definition as Record<string, unknown>;
  const keys = Object.keys(d).filter((k) => JSON.stringify(d[k]) !== JSON.stringify(o[k]));
  if (keys.length === 0) return "no change";
  return keys.map((k) => (k === "image_name" ? `image → ${r.definition.image_name}` : k)).join(", ");
}

export function Revisions({ service: s, url }: { service: Service; url: string }) {
  // Service events (a new definition, a rollback) refresh the list.
  const list = useList<Row>(query(`${url}revisions/`, { limit: 100 }), ["service"]);
  const what = `service ${s.name}`;
  const allowed = gate(SERVICE_OPERATIONS, "rollback", s.state, what);
  const rows = (list.data?.objects ?? []).map((r) => ({ ...r, resource_uri: `${url}revisions/${r.number}` }));
  return (
    <section aria-label="Revisions">
      <h2>Revisions</h2>
      {list.error && <ErrorLine error={list.error} />}
      {!list.data && !list.error ? (
        <Loading />
      ) : (
        <Table<Row>
          label="Revisions of the service"
          rows={rows}
          empty="No kept definitions."
          columns={[
            {
              label: "Revision",
              render: (r) => (r.current ? <strong>{`${r.number} (current)`}</strong> : String(r.number)),
            },
            { label: "Image", render: (r) => r.definition.image_name },
            { label: "Changed", render: (r) => changes(r, rows[rows.indexOf(r) + 1]) },
            {
              label: "Made by",
              render: (r) => (r.action ? <a href={`#/actions/${uuidOf(r.action)}`}>{r.cause}</a> : r.cause),
            },
            { label: "Created", render: (r) => <When at={r.created_datetime} /> },
            {
              label: "",
              render: (r) =>
                r.current ? null : (
                  <Op
                    label={`Roll back to ${r.number}`}
                    allowed={allowed}
                    confirm={`Roll ${what} back to revision ${r.number} (${r.definition.image_name})? Its containers are redeployed with that definition.`}
                    run={() => call("POST", `${url}rollback/`, { revision: r.number })}
                  />
                ),
            },
          ]}
        />
      )}
    </section>
  );
}
