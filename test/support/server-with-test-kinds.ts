// The real server entry, plus the test-only widget kind: the crash test runs this as a process.
import { loadConfig } from "../../src/config/index.ts";
import { startServer, stopOnSignals } from "../../src/main.ts";
import { registerWidgetKind, widgetRoutes } from "./test-kinds.ts";

const server = await startServer(loadConfig(), {
  extend: ({ actions, store, identity }) => {
    registerWidgetKind(actions);
    return { routes: [widgetRoutes({ actions, store, identity })] };
  },
});
stopOnSignals(server);
process.stdout.write("berth test server ready\n");
