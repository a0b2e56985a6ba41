// Where the CLI finds its server and credentials: a config file readable by its owner only
// (`berth login` writes it; BERTH_CONFIG moves it), overridden by environment variables
// (BERTH_URL, BERTH_USER, BERTH_APIKEY, BERTH_NAMESPACE and the historical DOCKERCLOUD_* names).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { CliError } from "./errors.ts";

export const DEFAULT_URL = "http://127.0.0.1:8000";

export interface StoredConfig {
  url?: string;
  user?: string;
  apikey?: string;
  /** Id of the key `login` made, so `logout` can revoke it. */
  apikey_id?: number;
  namespace?: string;
}

export interface Credentials {
  url: string;
  user: string | undefined;
  apiKey: string | undefined;
  /** Namespace used when a command names none (`--namespace` wins over it). */
  namespace: string | undefined;
  /** Where each value came from, for `whoami`. */
  source: { url: string; user: string };
}

export function configPath(env: NodeJS.ProcessEnv): string {
  if (env.BERTH_CONFIG) return path.resolve(env.BERTH_CONFIG);
  const base = env.XDG_CONFIG_HOME || path.join(env.HOME || os.homedir(), ".config");
  return path.join(base, "berth", "config.json");
}

export function readConfig(file: string): StoredConfig {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("not an object");
    const out: StoredConfig = {};
    for (const key of ["url", "user", "apikey", "namespace"] as const) {
      const v = (parsed as Record<string, unknown>)[key];
      if (typeof v === "string" && v !== "") out[key] = v;
    }
    const id = (parsed as Record<string, unknown>).apikey_id;
    if (typeof id === "number") out.apikey_id = id;
    return out;
  } catch (err) {
    throw new CliError(
      `${file} is not a berth config file (${(err as Error).message}); run berth login again`,
    );
  }
}

/** Writes the file with mode 0600 (and its folder 0700), replacing it atomically. */
export function writeConfig(file: string, config: StoredConfig): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  fs.chmodSync(tmp, 0o600);
  fs.renameSync(tmp, file);
}

export function removeConfig(file: string): boolean {
  try {
    fs.unlinkSync(file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw new CliError(`cannot remove ${file}: ${(err as Error).message}`);
  }
}

/** The historical CLI's REST host variable held a bare host or a URL. */
function urlOf(value: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`;
  return withScheme.replace(/\/+$/, "");
}

export function credentials(env: NodeJS.ProcessEnv, stored: StoredConfig): Credentials {
  const pick = (...pairs: [string | undefined, string][]): [string, string] | undefined => {
    for (const [value, from] of pairs) if (value) return [value, from];
    return undefined;
  };
  const url = pick(
    [env.BERTH_URL, "BERTH_URL"],
    [env.DOCKERCLOUD_REST_HOST, "DOCKERCLOUD_REST_HOST"],
    [stored.url, "config"],
  );
  const user = pick([env.BERTH_USER, "BERTH_USER"], [env.DOCKERCLOUD_USER, "DOCKERCLOUD_USER"]);
  const apiKey = env.BERTH_APIKEY || env.DOCKERCLOUD_APIKEY;
  // Credentials come as a pair: a user from the environment never borrows the stored key.
  const fromEnv = user !== undefined || apiKey;
  return {
    url: url ? urlOf(url[0]) : DEFAULT_URL,
    user: fromEnv ? user?.[0] : stored.user,
    apiKey: fromEnv ? apiKey || undefined : stored.apikey,
    namespace: env.BERTH_NAMESPACE || env.DOCKERCLOUD_NAMESPACE || stored.namespace || undefined,
    source: { url: url ? url[1] : "default", user: fromEnv ? (user?.[1] ?? "environment") : "config" },
  };
}
