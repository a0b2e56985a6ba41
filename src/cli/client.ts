// HTTP client for the Berth API: global fetch and Basic auth, nothing else.

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

export interface ClientConfig {
  url: string;
  user: string | undefined;
  apiKey: string | undefined;
  namespace: string | undefined;
}

// biome-ignore lint/suspicious/noExplicitAny: the CLI reads arbitrary JSON objects.
export type Json = any;

export function configFromEnv(env: NodeJS.ProcessEnv, namespace: string | undefined): ClientConfig {
  return {
    url: (env.BERTH_URL || "http://127.0.0.1:8000").replace(/\/+$/, ""),
    user: env.BERTH_USER || env.DOCKERCLOUD_USER,
    apiKey: env.BERTH_APIKEY || env.DOCKERCLOUD_APIKEY,
    namespace,
  };
}

export class Client {
  constructor(readonly config: ClientConfig) {}

  /** A namespaced path: `/api/app/v1/` + `ns/` + `service/`. */
  ns(prefix: string, resource: string): string {
    const ns = this.config.namespace ? `${encodeURIComponent(this.config.namespace)}/` : "";
    return `${prefix}${ns}${resource}/`;
  }

  async request(method: string, path: string, body?: unknown): Promise<Json> {
    const headers: Record<string, string> = { accept: "application/json", "user-agent": "berth-cli/0.1" };
    if (this.config.user !== undefined && this.config.apiKey !== undefined) {
      const token = Buffer.from(`${this.config.user}:${this.config.apiKey}`).toString("base64");
      headers.authorization = `Basic ${token}`;
    }
    if (body !== undefined) headers["content-type"] = "application/json";
    let res: Response;
    try {
      res = await fetch(this.config.url + path, {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (err) {
      const cause = (err as { cause?: { message?: string } }).cause?.message;
      throw new CliError(`cannot reach ${this.config.url}: ${cause ?? (err as Error).message}`);
    }
    const text = await res.text();
    let parsed: Json;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    if (!res.ok) {
      const message =
        parsed && typeof parsed === "object" && typeof parsed.error === "string"
          ? parsed.error
          : `${res.status} ${res.statusText}${text ? `: ${text}` : ""}`;
      throw new CliError(message);
    }
    return parsed;
  }

  /** A list call; returns the whole envelope (`{meta, objects}`). */
  list(path: string, query: Record<string, string> = {}): Promise<Json> {
    const qs = new URLSearchParams(query).toString();
    return this.request("GET", qs ? `${path}?${qs}` : path);
  }

  /** Finds one object by name, else by uuid (prefix); live objects win over terminated ones. */
  async resolve(path: string, what: string, ref: string): Promise<Json> {
    const queries: Record<string, string>[] = [{ name: ref }];
    if (/^[0-9a-f-]+$/i.test(ref)) queries.push({ uuid__startswith: ref.toLowerCase() });
    for (const query of queries) {
      const page = await this.list(path, query);
      const objects: Json[] = page?.objects ?? [];
      const live = objects.filter((o) => o.state !== "Terminated");
      const candidates = live.length > 0 ? live : objects;
      if (candidates.length === 1) return candidates[0];
      if (candidates.length > 1)
        throw new CliError(`${what} ${ref} is ambiguous: ${candidates.length} match; use more of its uuid`);
    }
    throw new CliError(`${what} ${ref} not found`);
  }
}
