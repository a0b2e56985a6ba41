// The real server entry (src/main.ts's startServer, with its process guard), plus a route only
// this test server has: it throws, outside any request or promise chain, an error of the kind
// asked for, as a node's I/O or a bug in Berth would. test/process/guard.test.ts runs it.
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { loadConfig } from "../../src/config/index.ts";
import { EngineError } from "../../src/drivers/engine.ts";
import { guardProcess, startServer, stopOnSignals } from "../../src/main.ts";
import type { Platform } from "../../src/platform.ts";

const Fault = Type.Object({
  kind: Type.Union([Type.Literal("node-io-throw"), Type.Literal("node-io-rejection"), Type.Literal("bug")]),
});

function faultRoutes(app: FastifyInstance): void {
  app.post(
    "/api/app/v1/test-fault/",
    {
      config: { access: { admin: "Only administrators inject faults." } },
      schema: { hide: true, body: Fault, response: { 202: Type.Object({ kind: Type.String() }) } },
    },
    async (req, reply) => {
      const { kind } = req.body as { kind: string };
      setImmediate(() => {
        if (kind === "node-io-throw")
          throw new EngineError("unreachable", "engine at tcp://tunnel-0000:2375 broke the rules");
        if (kind === "node-io-rejection")
          void Promise.reject(new EngineError("unreachable", "engine at tcp://tunnel-0000:2375 went away"));
        if (kind === "bug") (undefined as unknown as { call(): void }).call();
      });
      return reply.status(202).send({ kind });
    },
  );
}

let server: Platform | undefined;
guardProcess(() => server?.app.log);
server = await startServer(loadConfig(), { extend: () => ({ routes: [faultRoutes] }) });
stopOnSignals(server);
process.stdout.write("berth test server ready\n");
