// Shared by the router tests on simulated nodes: a running service serving one domain, and the
// certificate its view shows for it.
import { call, createService, operate, type Sim, until } from "../services/sim.ts";

/** Starts `name` (one container listening on 8080) serving `host`; answers it and its certificate. */
export async function servingDomain(s: Sim, name: string, host: string) {
  const created = await createService(s, {
    image: "busybox:local",
    name,
    run_command: "sleep 100000",
    container_ports: [{ protocol: "tcp", inner_port: 8080 }],
    domains: [{ host }],
  });
  await operate(s, created.resource_uri, "start");
  const svc = await until(s, created.resource_uri, "Running");
  const certificate = async () =>
    (await call(s.h, s.alice, "GET", svc.resource_uri)).body.domains[0].certificate;
  return { svc, certificate };
}
