// API field names in the words the dashboard's forms use ("target_num_containers" → "Containers"),
// so a refusal reads like the form a person filled in, not like the API.
const WORDS: Record<string, string> = {
  target_num_containers: "Containers",
  target_num_nodes: "Nodes",
  node_type: "Node type",
  region: "Region",
  image: "Image",
  name: "Name",
  nickname: "Nickname",
  run_command: "Command",
  entrypoint: "Entrypoint",
  container_ports: "Ports",
  container_envvars: "Environment variables",
  linked_to_service: "Links",
  bindings: "Volumes",
  deployment_strategy: "Deployment strategy",
  autorestart: "Autorestart",
  autodestroy: "Autodestroy",
  cpu_shares: "CPU shares",
  memory: "Memory",
  disk: "Disk",
  tags: "Tags",
  engine_url: "Engine URL",
  username: "Username",
  email: "Email",
  password: "Password",
  old_password: "Current password",
  new_password: "New password",
};

/** The words for an API field ("container_ports[0].inner_port" → "Ports[0].inner_port"). */
export function fieldWords(field: string): string {
  const top = field.split(/[.[]/)[0] ?? field;
  const word = WORDS[top];
  return word ? word + field.slice(top.length) : field;
}

/** A sentence of the API with a leading field name ("image: must be…") in words. */
export function inWords(text: string): string {
  const m = /^([a-z_][a-z0-9_]*(?:\[\d+\])?(?:\.[a-z_]+)*):\s/.exec(text);
  return m ? `${fieldWords(m[1]!)}: ${text.slice(m[0].length)}` : text;
}
