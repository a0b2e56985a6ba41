// Helpers of the agent tests: registering through the agent endpoint, as the agent does.
import { call, type Harness } from "../support/harness.ts";

export function engineFacts(id = `engine-${Math.random().toString(36).slice(2, 10)}`) {
  return {
    id,
    name: "box-under-the-desk",
    cpus: 4,
    memory_mb: 7900,
    disk_gb: 120.5,
    version: "20.10.24",
    storage_driver: "overlay2",
    exec_driver: "native",
  };
}

export async function register(h: Harness, token: string, extra: Record<string, unknown> = {}) {
  return call(h, undefined, "POST", "/api/agent/v1/register/", { token, engine: engineFacts(), ...extra });
}
