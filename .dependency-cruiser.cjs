// Boundaries of ARCHITECTURE.md, held by `npm run boundaries` (part of `npm run check` and CI).
// Each rule names the invariant it holds; a wrong import fails the check with that name.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-cycles",
      comment: "Modules form no import cycle: components meet through the store and small ports.",
      severity: "error",
      from: { path: "^(src|web)/" },
      to: { circular: true },
    },
    {
      name: "only-drivers-talk-to-engines",
      comment: "Only src/drivers/ imports dockerode (engines are reached through the Engine interface).",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/drivers/" },
      to: { path: "(^|/)node_modules/(dockerode|docker-modem)/" },
    },
    {
      name: "only-store-knows-sql",
      comment: "Only src/store/ imports Kysely or a database driver (and so writes SQL).",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/store/" },
      to: { path: "(^|/)node_modules/(kysely|better-sqlite3|pg|pg-pool)/" },
    },
    {
      name: "domain-and-scheduler-are-pure",
      comment:
        "src/domain/ and src/scheduler/ do no I/O: they import only each other, src/contract/ schemas, " +
        "typebox and pure node built-ins; engine types may be imported as types only.",
      severity: "error",
      from: { path: "^src/(domain|scheduler)/" },
      to: {
        pathNot: "^src/(domain|scheduler|contract)/|(^|/)node_modules/typebox/|^node:(crypto|net|path|util)$|^(crypto|net|path|util)$",
        dependencyTypesNot: ["type-only"],
      },
    },
    {
      name: "api-never-holds-an-engine",
      comment: "src/api/ reaches engines only through ports of the runtime (orchestrator/container-io.ts).",
      severity: "error",
      from: { path: "^src/api/" },
      to: { path: "^src/drivers/" },
    },
    {
      name: "cli-talks-http-only",
      comment:
        "The command line talks to the server over HTTP and WebSocket only, never to its internals: " +
        "it imports only pure modules of src/domain/ and src/contract/, and the agent's option table " +
        "(the agent and admin parts are separate bundles it loads by URL, src/cli/parts.ts).",
      severity: "error",
      from: { path: "^src/cli/" },
      to: { path: "^src/", pathNot: "^src/(cli|domain|contract)/|^src/agent/options\\.ts$" },
    },
    {
      name: "dashboard-is-a-client",
      comment: "The dashboard (web/) runs in the browser: it imports no server module.",
      severity: "error",
      from: { path: "^web/" },
      to: { path: "^src/(?!contract/|domain/)" },
    },
    {
      name: "modules-are-composed-by-platform",
      comment:
        "Each capability assembles itself in src/<capability>/module.ts and platform.ts lists them: only " +
        "platform.ts imports a module's code; another module may name a module's type (what it is given).",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/platform\\.ts$" },
      to: { path: "^src/[^/]+/module\\.ts$", dependencyTypesNot: ["type-only"] },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".tsx", ".js", ".mjs"] },
    exclude: { path: "^(node_modules|dist|data|\\.tmp)/" },
  },
};
