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

// Benches (bench/placement-replicas.ts) ask a replica process for its store's counts with SIGUSR2.
process.on("SIGUSR2", () => {
  const s = server.db.statements;
  process.stdout.write(`berth-bench-counts statements=${s.count} transactions=${s.transactions}\n`);
});
