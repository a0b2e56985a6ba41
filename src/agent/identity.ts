// The agent's identity on disk: which Berth, which node, and the node key. Kept in a 0600 file
// inside a 0700 directory, written atomically, so a restart re-attaches the same node.
import { chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";

export interface AgentIdentity {
  /** Berth's URL as the agent was told it (the tunnel is reached there). */
  url: string;
  node_uuid: string;
  namespace: string;
  node_key: string;
  resource_uri: string;
}

export const IDENTITY_FILE = "identity.json";

export async function loadIdentity(stateDir: string): Promise<AgentIdentity | undefined> {
  let text: string;
  try {
    text = await readFile(path.join(stateDir, IDENTITY_FILE), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  const v = JSON.parse(text) as Partial<AgentIdentity>;
  if (typeof v.url !== "string" || typeof v.node_uuid !== "string" || typeof v.node_key !== "string")
    throw new Error(`${path.join(stateDir, IDENTITY_FILE)} is not an agent identity file`);
  return {
    url: v.url,
    node_uuid: v.node_uuid,
    node_key: v.node_key,
    namespace: v.namespace ?? "",
    resource_uri: v.resource_uri ?? "",
  };
}

export async function saveIdentity(stateDir: string, identity: AgentIdentity): Promise<void> {
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  await chmod(stateDir, 0o700);
  const file = path.join(stateDir, IDENTITY_FILE);
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(identity, null, 2)}\n`, { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, file);
}

export async function forgetIdentity(stateDir: string): Promise<void> {
  await rm(path.join(stateDir, IDENTITY_FILE), { force: true });
}
