// Route helpers: the optional namespace segment and 405 for methods a path does not define.
import type { FastifyInstance } from "fastify";
import { ApiError } from "../domain/errors.ts";
import { sendError } from "./errors.ts";

/** `/api/app/v1/{ns}service/:uuid/` → both the bare and the namespaced form (CONTRACT §1). */
export function nsPaths(template: string): string[] {
  return [template.replace("{ns}", ""), template.replace("{ns}", ":namespace/")];
}

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/** Collects registered paths, then answers 405 (with Allow) for the methods each path lacks. */
export class MethodTable {
  private readonly methods = new Map<string, Set<string>>();

  constructor(app: FastifyInstance) {
    app.addHook("onRoute", (route) => {
      if (route.config?.fallback) return;
      const set = this.methods.get(route.url) ?? new Set<string>();
      for (const m of Array.isArray(route.method) ? route.method : [route.method]) set.add(m);
      this.methods.set(route.url, set);
    });
  }

  private patterns?: { re: RegExp; methods: Set<string> }[];

  /** The methods of every route whose path matches `path`; undefined when none does. */
  allowedMethods(path: string): string[] | undefined {
    // A `*` segment (a repository's name, which has slashes; an asset) matches one segment or more,
    // so its path answers 405 like any other (issue 27: OPTIONS on a repository was 404).
    this.patterns ??= [...this.methods]
      .filter(([url]) => url !== "*")
      .map(([url, methods]) => ({
        re: new RegExp(
          `^${url
            .replace(/\/+$/, "")
            .split("/")
            .map((seg) =>
              seg === "*" ? ".+" : seg.startsWith(":") ? "[^/]+" : seg.replace(/[.+?^${}()|[\]\\*]/g, "\\$&"),
            )
            .join("/")}/?$`,
        ),
        methods,
      }));
    const found = new Set<string>();
    for (const p of this.patterns) if (p.re.test(path)) for (const m of p.methods) found.add(m);
    const allow = METHODS.filter((m) => found.has(m));
    return allow.length ? allow : undefined;
  }

  installFallbacks(app: FastifyInstance): void {
    for (const [url, set] of [...this.methods]) {
      if (url === "*" || url.includes("*")) continue;
      const allow = METHODS.filter((m) => set.has(m));
      if (!allow.length) continue;
      for (const m of METHODS) {
        if (set.has(m)) continue;
        app.route({
          method: m,
          url,
          config: { fallback: true },
          schema: { hide: true },
          handler: (request, reply) => {
            reply.header("Allow", allow.join(", "));
            return sendError(
              request,
              reply,
              new ApiError(
                "method_not_allowed",
                "method_not_allowed",
                `${m} is not allowed here; use ${allow.join(", ")}.`,
              ),
            );
          },
        });
      }
    }
  }
}
