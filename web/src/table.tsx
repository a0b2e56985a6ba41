// Lists: tables with sortable columns, pagination, and the list page's body.
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { Selection } from "./bulk.tsx";
import { route, routeQuery } from "./router.ts";
import { ErrorLine, Loading, Select } from "./ui.tsx";

export interface Column<T> {
  label: string;
  render(o: T): ComponentChildren;
  class?: string;
  /** The list's `order_by` key this column sorts by (the API sorts: right at any size). */
  sort?: "name" | "state" | "created";
}

/** A list's sort order: the API's `order_by` ("name", "-state"…), and how to change it. */
export interface Order {
  value: string;
  set(v: string): void;
}

function SortHeader(props: { label: string; key_: string; order: Order }) {
  const { value, set } = props.order;
  const on = value.replace(/^-/, "") === props.key_;
  const desc = value.startsWith("-");
  return (
    <button
      type="button"
      class="sort link"
      title={`Sort by ${props.label.toLowerCase()}`}
      onClick={() => set(on && !desc ? `-${props.key_}` : props.key_)}
    >
      {props.label}
      <span aria-hidden="true">{on ? (desc ? " ▼" : " ▲") : ""}</span>
    </button>
  );
}

export function Table<T extends { resource_uri: string }>(props: {
  columns: Column<T>[];
  rows: T[];
  empty: string;
  label: string;
  order?: Order;
  /** Ticks a row for a bulk operation (a first column of checkboxes). */
  selection?: Selection;
}) {
  if (props.rows.length === 0) return <p class="empty">{props.empty}</p>;
  const sel = props.selection;
  const uris = props.rows.map((r) => r.resource_uri);
  const allOn = sel !== undefined && uris.every((u) => sel.has(u));
  return (
    <div class="table-wrap">
      <table aria-label={props.label}>
        <thead>
          <tr>
            {sel && (
              <th scope="col" class="pick">
                <input
                  type="checkbox"
                  aria-label="Select all on this page"
                  checked={allOn}
                  onChange={() => sel.setAll(uris, !allOn)}
                />
              </th>
            )}
            {props.columns.map((c) => (
              <th
                key={c.label}
                scope="col"
                class={c.class}
                aria-sort={
                  props.order && c.sort && props.order.value.replace(/^-/, "") === c.sort
                    ? props.order.value.startsWith("-")
                      ? "descending"
                      : "ascending"
                    : undefined
                }
              >
                {props.order && c.sort ? (
                  <SortHeader label={c.label} key_={c.sort} order={props.order} />
                ) : (
                  c.label
                )}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((r) => (
            <tr key={r.resource_uri} data-uri={r.resource_uri}>
              {sel && (
                <td class="pick">
                  <input
                    type="checkbox"
                    aria-label="Select"
                    checked={sel.has(r.resource_uri)}
                    onChange={() => sel.toggle(r.resource_uri)}
                  />
                </td>
              )}
              {props.columns.map((c) => (
                <td key={c.label} class={c.class} data-label={c.label}>
                  {c.render(r)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function Pager(props: { offset: number; limit: number; total: number; go(offset: number): void }) {
  if (props.total <= props.limit && props.offset === 0) return <p class="count">{props.total} in all</p>;
  const last = Math.min(props.offset + props.limit, props.total);
  return (
    <nav class="pager" aria-label="Pages">
      <button
        type="button"
        disabled={props.offset === 0}
        onClick={() => props.go(Math.max(0, props.offset - props.limit))}
      >
        Previous
      </button>
      <span>
        {props.total === 0 ? 0 : props.offset + 1}–{last} of {props.total}
      </span>
      <button
        type="button"
        disabled={last >= props.total}
        onClick={() => props.go(props.offset + props.limit)}
      >
        Next
      </button>
    </nav>
  );
}

/** A state filter for a list: "any" or one state of its table. */
export function StateFilter(props: { value: string; states: string[]; onChange(v: string): void }) {
  return (
    <label>
      State{" "}
      <Select
        value={props.value}
        onChange={props.onChange}
        options={[{ value: "", label: "any" }, ...props.states]}
      />
    </label>
  );
}

/** A list page's body: its error, then the table and the pager once loaded. */
export function PagedTable<T extends { resource_uri: string }>(props: {
  list: { data?: { objects: T[]; meta: { total_count: number } }; error?: unknown };
  offset: number;
  limit: number;
  go(offset: number): void;
  label: string;
  empty: string;
  columns: Column<T>[];
  order?: Order;
  selection?: Selection;
}) {
  return (
    <>
      <FailingOnly />
      <ErrorLine error={props.list.error} />
      {!props.list.data ? (
        <Loading />
      ) : (
        <>
          <Table<T>
            label={props.label}
            rows={props.list.data.objects}
            empty={props.empty}
            columns={props.columns}
            order={props.order}
            selection={props.selection}
          />
          <Pager
            offset={props.offset}
            limit={props.limit}
            total={props.list.data.meta.total_count}
            go={props.go}
          />
        </>
      )}
    </>
  );
}

/** What `failing=true` means on each list page (the API's rule, src/store/overview.ts). */
const FAILING_MEANS: Record<string, string> = {
  "/containers": "crashed, or running with a failing health check",
  "/services": "a container crashed or unhealthy, or partly running",
  "/stacks": "a service failing, or partly running",
  "/nodes": "unreachable",
  "/nodeclusters": "a node unreachable, or partly deployed",
};

/** A list reached from the overview's "failing now" shows only those, and says so. */
export function FailingOnly() {
  const path = route.value;
  if (!onlyFailing(path)) return null;
  const page = path.split("?")[0] ?? "";
  const means = FAILING_MEANS[page];
  return (
    <p class="only-failing" role="status">
      Only failing ones{means ? `: ${means}` : ""}. <a href={`#${page}`}>Show all</a>
    </p>
  );
}

const onlyFailing = (path: string) => routeQuery(path).get("failing") === "true";

/**
 * The search, order and page of a list page, as the API's query parameters (`name__icontains`,
 * `order_by`, `offset`): a new search or order goes back to the first page.
 */
export function useListControls(defaultOrder = "-created") {
  const [offset, setOffset] = useState(0);
  const [search, setSearchNow] = useState("");
  const [order, setOrderNow] = useState(defaultOrder);
  return {
    offset,
    setOffset,
    search,
    setSearch(v: string) {
      setSearchNow(v);
      setOffset(0);
    },
    order: {
      value: order,
      set(v: string) {
        setOrderNow(v);
        setOffset(0);
      },
    } as Order,
    /** The query parameters for the list's URL. */
    params: {
      offset,
      // `#/containers?failing=true` (the overview's link): the API's filter of failing ones.
      failing: onlyFailing(route.value) ? "true" : undefined,
      name__icontains: search.trim() || undefined,
      order_by: order === defaultOrder ? undefined : order,
    },
  };
}

/** A search box: the list follows what is typed (briefly debounced), the server does the search. */
export function SearchBox(props: {
  value: string;
  onSearch(v: string): void;
  label?: string;
  placeholder?: string;
}) {
  const [text, setText] = useState(props.value);
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(timer.current), []);
  return (
    <label class="search">
      {props.label ?? "Search"}{" "}
      <input
        type="search"
        name="search"
        value={text}
        placeholder={props.placeholder ?? "name contains…"}
        onInput={(e) => {
          const v = (e.target as HTMLInputElement).value;
          setText(v);
          clearTimeout(timer.current);
          timer.current = setTimeout(() => props.onSearch(v), 60);
        }}
      />
    </label>
  );
}
