// Hash routes (`#/services/<uuid>`): the server serves one page at `/`, so every dashboard
// address works on reload and never collides with an API path.
import { signal } from "@preact/signals";

const current = () => location.hash.replace(/^#/, "") || "/";
export const route = signal<string>(current());
window.addEventListener("hashchange", () => {
  route.value = current();
});

export function navigate(to: string): void {
  location.hash = to;
}

/** Matches `/services/:uuid` against a path; the params, or undefined. */
export function match(pattern: string, path: string): Record<string, string> | undefined {
  const p = pattern.split("/").filter(Boolean);
  const [pathOnly] = path.split("?");
  const s = (pathOnly ?? "").split("/").filter(Boolean);
  if (p.length !== s.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    const want = p[i]!;
    const got = decodeURIComponent(s[i]!);
    if (want.startsWith(":")) params[want.slice(1)] = got;
    else if (want !== got) return undefined;
  }
  return params;
}

/** Query parameters of the current hash route. */
export function routeQuery(path: string): URLSearchParams {
  const i = path.indexOf("?");
  return new URLSearchParams(i === -1 ? "" : path.slice(i + 1));
}
