// The list envelope of the platform API (CONTRACT §5).
import type { FastifyRequest } from "fastify";
import { type TSchema, Type } from "typebox";
import { View } from "../contract/common.ts";
import { bytesOf, jsonOf, madeJson } from "../domain/json.ts";

/** Offsets beyond this are refused (400) rather than handed to the database as out-of-range numbers. */
export const MAX_OFFSET = 2147483647;

export const PAGE_QUERY = {
  limit: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 1000, default: 25, description: "page size (1–1000)" }),
  ),
  offset: Type.Optional(
    Type.Integer({ minimum: 0, maximum: MAX_OFFSET, default: 0, description: `first row (0–${MAX_OFFSET})` }),
  ),
};

export interface Page {
  limit: number;
  offset: number;
}

export function pageOf(query: { limit?: number; offset?: number }): Page {
  return { limit: query.limit ?? 25, offset: query.offset ?? 0 };
}

export interface Envelope<T> {
  meta: { limit: number; offset: number; total_count: number; next: string | null; previous: string | null };
  objects: T[];
}

/**
 * A page's objects stop once their JSON passes this size (at least one object is always sent), so
 * no caller can make the server build an answer of unbounded size: `meta.limit` then says how
 * many objects this page holds and `next` continues right after them.
 */
export const MAX_PAGE_CHARS = 8 * 1024 * 1024;

const COMMA = Buffer.from(",");
const END = Buffer.from("]}");

/** The JSON of as many of `objects` as fit in `maxChars` (at least one); JSON already made is reused. */
function fitting(objects: readonly unknown[], maxChars: number): string[] {
  const out: string[] = [];
  let chars = 0;
  for (const o of objects) {
    const json = jsonOf(o);
    chars += json.length + 1;
    if (chars > maxChars && out.length > 0) break;
    out.push(json);
  }
  return out;
}

/** Builds the envelope; `next`/`previous` are relative paths that keep every filter of the request. */
export function envelope<T>(
  request: FastifyRequest,
  page: Page,
  total: number,
  objects: T[],
  maxChars = MAX_PAGE_CHARS,
): Envelope<T> {
  const [rawPath, rawQuery = ""] = request.url.split("?", 2) as [string, string?];
  const path = rawPath.replace(/\/{2,}/g, "/").replace(/\/?$/, "/");
  const link = (offset: number) => {
    const params = new URLSearchParams(rawQuery);
    params.set("limit", String(page.limit));
    params.set("offset", String(offset));
    return `${path}?${params.toString()}`;
  };
  const made = fitting(objects, maxChars);
  const kept = made.length;
  const shown = kept < objects.length ? objects.slice(0, kept) : objects;
  const end = page.offset + (kept < objects.length ? kept : page.limit);
  const next = end < total ? link(end) : null;
  const previous = page.offset > 0 ? link(Math.max(0, page.offset - page.limit)) : null;
  const limit = kept < objects.length ? kept : page.limit;
  const meta = { limit, offset: page.offset, total_count: total, next, previous };
  const value = Object.freeze({ meta: Object.freeze(meta), objects: shown }) as Envelope<T>;
  // The objects' JSON, made to bound the page, is the answer's (api/serialize.ts): an envelope is
  // final. Objects kept encoded (orchestrator/views.ts) are copied as bytes: one buffer, no text.
  const head = `{"meta":${JSON.stringify(meta)},"objects":[`;
  const encoded = shown.map(bytesOf);
  if (shown.length > 0 && encoded.every((b) => b !== undefined)) {
    const parts: Uint8Array[] = [Buffer.from(head)];
    for (const [i, b] of encoded.entries()) {
      if (i > 0) parts.push(COMMA);
      parts.push(b);
    }
    parts.push(END);
    return madeJson(value, { bytes: Buffer.concat(parts) });
  }
  return madeJson(value, { text: `${head}${made.join(",")}]}` });
}

/** A page's answer; open objects like every answer (contract/common.ts), so JSON.stringify sends it. */
export function listSchema<T extends TSchema>(item: T) {
  return View({
    meta: View({
      limit: Type.Integer(),
      offset: Type.Integer(),
      total_count: Type.Integer(),
      next: Type.Union([Type.String(), Type.Null()]),
      previous: Type.Union([Type.String(), Type.Null()]),
    }),
    objects: Type.Array(item),
  });
}

/** Search and order of a list (the dashboard's search box and sortable columns). */
export const SEARCH_QUERY = {
  name__icontains: Type.Optional(
    Type.String({ minLength: 1, maxLength: 200, description: "names containing this text, in any case" }),
  ),
  order_by: Type.Optional(
    Type.Union(
      (["name", "-name", "state", "-state", "created", "-created"] as const).map((o) => Type.Literal(o)),
      { description: "order: name, state or created, '-' for descending (default -created)" },
    ),
  ),
};
