// Stats of a container, a service or a node (issue 32): the charts load with their own chunk
// when the panel first shows (a dynamic import), so the dashboard's first load stays small.
import type { ComponentType } from "preact";
import { useEffect, useState } from "preact/hooks";

type Charts = ComponentType<{ path: string }>;
let loaded: Promise<Charts> | undefined;

export function StatsPanel(props: { path: string }) {
  const [Charts, setCharts] = useState<Charts | undefined>(undefined);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    loaded ??= import("./stats-charts.tsx").then((m) => m.StatsCharts);
    loaded.then((c) => setCharts(() => c)).catch(() => setFailed(true));
  }, []);
  return (
    <section class="stats" aria-label="Stats">
      <h2>Stats</h2>
      {Charts ? (
        <Charts path={props.path} />
      ) : (
        <p>{failed ? "The charts could not be loaded." : "Loading…"}</p>
      )}
    </section>
  );
}
