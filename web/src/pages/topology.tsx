// A stack's topology: its services as boxes (state coloured, linked to their pages) in columns by
// how deep their links go, and an arrow for each link, labelled with the link's name. A link to a
// service outside the stack is drawn to a box of its own.
import { sameUri } from "../live.ts";
import { ObjectLink } from "../names.tsx";

interface Node {
  resource_uri: string;
  uuid: string;
  name: string;
  state?: string;
  linked_to_service: { name: string; to_service: string }[];
}

const W = 150;
const H = 44;
const GAP_X = 90;
const GAP_Y = 24;

const COLOUR: Record<string, string> = {
  Running: "good",
  "Partly running": "warn",
  Stopped: "idle",
  "Not running": "idle",
  Terminated: "gone",
};

export function Topology({ services }: { services: Node[] }) {
  if (services.length === 0) return null;
  const byUri = (u: string) => services.find((s) => sameUri(s.resource_uri, u));
  const outside = [
    ...new Set(
      services.flatMap((s) => s.linked_to_service.map((l) => l.to_service)).filter((u) => !byUri(u)),
    ),
  ];
  // Depth: a service's column is one more than the deepest it links to (those it uses to its right).
  const depth = new Map<string, number>();
  const depthOf = (uri: string, seen: Set<string>): number => {
    const known = depth.get(uri);
    if (known !== undefined) return known;
    const s = byUri(uri);
    if (!s || seen.has(uri)) return 0;
    seen.add(uri);
    const d = s.linked_to_service.length
      ? 1 + Math.max(...s.linked_to_service.map((l) => depthOf(l.to_service, seen)))
      : 0;
    depth.set(uri, d);
    return d;
  };
  const all = [...services.map((s) => s.resource_uri), ...outside];
  const maxDepth = Math.max(0, ...all.map((u) => depthOf(u, new Set())));
  const columns: string[][] = Array.from({ length: maxDepth + 1 }, () => []);
  for (const u of all) columns[maxDepth - depthOf(u, new Set())]!.push(u);
  const at = new Map<string, { x: number; y: number }>();
  for (const [c, col] of columns.entries())
    for (const [r, u] of col.entries()) at.set(u, { x: c * (W + GAP_X), y: r * (H + GAP_Y) });
  const width = columns.length * (W + GAP_X) - GAP_X;
  const height = Math.max(...columns.map((c) => c.length)) * (H + GAP_Y) - GAP_Y;
  const edges = services.flatMap((s) =>
    s.linked_to_service.map((l) => ({ from: s.resource_uri, to: l.to_service, name: l.name })),
  );
  return (
    <figure class="topology" aria-label="Topology">
      <div class="topology-canvas" style={{ width: `${width}px`, height: `${height}px` }}>
        <svg width={width} height={height} aria-hidden="true">
          <defs>
            <marker
              id="arrow"
              viewBox="0 0 10 10"
              refX="10"
              refY="5"
              markerWidth="7"
              markerHeight="7"
              orient="auto"
            >
              <path d="M0,0 L10,5 L0,10 z" class="arrow-head" />
            </marker>
          </defs>
          {edges.map((e) => {
            const a = at.get(e.from);
            const b = at.get(e.to) ?? at.get(all.find((u) => sameUri(u, e.to)) ?? "");
            if (!a || !b) return null;
            const x1 = a.x + W;
            const y1 = a.y + H / 2;
            const x2 = b.x;
            const y2 = b.y + H / 2;
            return (
              <g key={`${e.from}-${e.name}`}>
                <line x1={x1} y1={y1} x2={x2} y2={y2} class="edge" marker-end="url(#arrow)" />
                <text x={(x1 + x2) / 2} y={(y1 + y2) / 2 - 4} class="edge-label" text-anchor="middle">
                  {e.name}
                </text>
              </g>
            );
          })}
        </svg>
        {all.map((u) => {
          const p = at.get(u)!;
          const s = byUri(u);
          return (
            <div
              key={u}
              class={`topo-node ${s ? (COLOUR[s.state ?? ""] ?? "busy") : "outside"}`}
              style={{ left: `${p.x}px`, top: `${p.y}px`, width: `${W}px`, height: `${H}px` }}
              data-service={s?.name}
            >
              {s ? <a href={`#/services/${s.uuid}`}>{s.name}</a> : <ObjectLink uri={u} />}
              <span class="topo-state">{s ? s.state : "other stack"}</span>
            </div>
          );
        })}
      </div>
      <figcaption class="hint">
        Arrows go from a service to the services it links to, with the link's name.
      </figcaption>
    </figure>
  );
}
