// Aligned plain-text tables, as the historical CLI printed them.

export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("   ")
      .trimEnd();
  return [line(headers), ...rows.map(line)].join("\n") + "\n";
}

/** Last meaningful segment of a resource URI (`/api/infra/v1/region/aws/us-east-1/` → `us-east-1`). */
export function lastSegment(uri: unknown): string {
  if (typeof uri !== "string" || uri === "") return "";
  const parts = uri.split("/").filter(Boolean);
  return parts[parts.length - 1] ?? "";
}

export function str(v: unknown): string {
  return v === null || v === undefined ? "" : String(v);
}

export function short(uuid: unknown): string {
  return str(uuid).slice(0, 8);
}
