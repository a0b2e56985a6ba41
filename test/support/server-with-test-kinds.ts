// The real server entry, plus the test-only widget kind: the crash test runs this as a process.
import { loadConfig } from "../../src/config/index.ts";
import { startServer, stopOnSignals } from "../../src/main.ts";
import { registerWidgetKind, widgetRoutes } from "./test-kinds.ts";

const server = await startServer(loadConfig(), {
  extend: ({ actions, store, identity }) => {
    // BERTH_TEST_WIDGET_STEPS: how many steps the widget kind has (its last step can be watched).
    registerWidgetKind(actions, Number(process.env.BERTH_TEST_WIDGET_STEPS ?? 30));
    return { routes: [widgetRoutes({ actions, store, identity })] };
  },
});
stopOnSignals(server);
process.stdout.write("berth test server ready\n");

// Benches (bench/placement-replicas.ts) ask a replica process for its store's counts with SIGUSR2;
// with BERTH_BENCH_STATEMENTS=1 it also prints its statements by count since the last ask.
const bySql = new Map<string, number>();
if (process.env.BERTH_BENCH_STATEMENTS === "1") {
  const counter = server.db.statements;
  const record = counter.record.bind(counter);
  counter.record = (event) => {
    record(event);
    const key = event.query.sql.slice(0, 110);
    bySql.set(key, (bySql.get(key) ?? 0) + 1);
  };
}
process.on("SIGUSR2", () => {
  const s = server.db.statements;
  const top = [...bySql]
    .sort((x, y) => y[1] - x[1])
    .slice(0, 25)
    .map(([sql, n]) => `berth-bench-statement ${n} ${sql.replace(/\s+/g, " ")}\n`);
  bySql.clear();
  process.stdout.write(
    `${top.join("")}berth-bench-counts statements=${s.count} transactions=${s.transactions}\n`,
  );
});
