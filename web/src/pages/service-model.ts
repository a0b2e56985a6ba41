// The Service object as the dashboard reads it, and the namespace's services as picker choices:
// shared by the services list, the service form and the stacks page without importing each other.

import type { Service as ServiceView } from "../../../src/contract/service.ts";
import { get, type ListPage, nsPath, query } from "../api.ts";
import type { Resource } from "../live.ts";

/** The service answer of the API (src/contract/service.ts), as a live resource. */
export type Service = ServiceView & Resource;

/** Services of the namespace for link and volumes-from pickers. */
export async function serviceChoices(): Promise<{ value: string; label: string }[]> {
  const page = await get<ListPage<Service>>(query(nsPath("app", "service"), { limit: 1000 }));
  return page.objects
    .filter((s) => s.state !== "Terminated")
    .map((s) => ({ value: s.resource_uri, label: s.name }));
}
