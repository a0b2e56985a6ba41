// The real server entry, plus the test-only widget kind: the crash test runs this as a process.
import { loadConfig } from "../../src/config/index.ts";
import { systemClock } from "../../src/domain/time.ts";
import { IdentityService } from "../../src/identity/service.ts";
import { startServer } from "../../src/main.ts";
import { registerWidgetKind, widgetRoutes } from "./test-kinds.ts";

await startServer(loadConfig(), {
  extend: ({ actions, store }) => {
    registerWidgetKind(actions);
    return { routes: [widgetRoutes({ actions, store, identity: new IdentityService(store, systemClock) })] };
  },
});
process.stdout.write("berth test server ready\n");
