// The Service object as the dashboard reads it, and the namespace's services as picker choices:
// shared by the services list, the service form and the stacks page without importing each other.
import { get, type ListPage, nsPath, query } from "../api.ts";
import type { Resource } from "../live.ts";

export interface Service extends Resource {
  uuid: string;
  name: string;
  nickname: string;
  image_name: string;
  state: string;
  stack: string | null;
  target_num_containers: number;
  current_num_containers: number;
  running_num_containers: number;
  deployment_strategy: string;
  containers: string[];
  container_ports: {
    protocol: string;
    inner_port: number;
    outer_port: number | null;
    published: boolean;
    endpoint_uri: string;
  }[];
  container_envvars: { key: string; value: string }[];
  linked_to_service: { name: string; to_service: string; from_service: string }[];
  bindings: {
    host_path: string | null;
    container_path: string | null;
    rewritable: boolean;
    volumes_from: string | null;
  }[];
  autorestart: string;
  autodestroy: string;
  autoredeploy: boolean;
  roles: string[];
  tags: { name: string }[];
  public_dns: string;
  synchronized: boolean;
  run_command: string;
  entrypoint: string;
  memory: number | null;
  cpu_shares: number | null;
  privileged: boolean;
  sequential_deployment: boolean;
  net: string;
  pid: string;
  working_dir: string;
  deployed_datetime: string | null;
}

/** Services of the namespace for link and volumes-from pickers. */
export async function serviceChoices(): Promise<{ value: string; label: string }[]> {
  const page = await get<ListPage<Service>>(query(nsPath("app", "service"), { limit: 1000 }));
  return page.objects
    .filter((s) => s.state !== "Terminated")
    .map((s) => ({ value: s.resource_uri, label: s.name }));
}
