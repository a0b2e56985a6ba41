// Times: one format everywhere (relative, "3 min ago", with the exact UTC time on hover), whatever
// format the API field carries (RFC 2822 or ISO 8601).
import { signal } from "@preact/signals";

/** Now, moved every 30 s so relative times stay true on a page left open. */
const now = signal(Date.now());
setInterval(() => {
  now.value = Date.now();
}, 30_000);

/** The exact time, one format: 2026-11-27 15:35:53 UTC. */
export function exact(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

/** "just now", "12 s ago", "5 min ago", "3 h ago", "2 d ago" (or "in …" for the future). */
export function relative(ms: number, at = Date.now()): string {
  const d = Math.round((at - ms) / 1000);
  const a = Math.abs(d);
  if (a < 5) return "just now";
  const text =
    a < 60
      ? `${a} s`
      : a < 3600
        ? `${Math.floor(a / 60)} min`
        : a < 86400
          ? `${Math.floor(a / 3600)} h`
          : `${Math.floor(a / 86400)} d`;
  return d >= 0 ? `${text} ago` : `in ${text}`;
}

export const parseTime = (v: string | null | undefined): number | undefined => {
  if (!v) return undefined;
  const ms = Date.parse(v);
  return Number.isNaN(ms) ? undefined : ms;
};

/** A time as relative words, its exact time on hover (and for screen readers, in `datetime`). */
export function When({ at }: { at: string | null | undefined }) {
  const ms = parseTime(at);
  if (ms === undefined) return <span class="muted">—</span>;
  const iso = new Date(ms).toISOString();
  return (
    <time dateTime={iso} title={exact(ms)}>
      {relative(ms, now.value)}
    </time>
  );
}
