// Views already built, kept with their JSON under the key of the rows they were built from
// (orchestrator/views.ts makes the keys), least recently used first out.

import { deepFreeze, madeJson } from "../domain/json.ts";

/**
 * Views already built, each under the key of the rows it was built from (see serviceKey), with
 * their JSON as text and bytes (domain/json.ts: a page's bytes join its views' own). A view is frozen once kept: it is
 * shared by every answer that shows it. Bounded by the characters of JSON kept, least recently used
 * first out.
 */
export class ViewFragments<T extends object> {
  private readonly entries = new Map<string, { key: string; view: T; chars: number }>();
  private chars = 0;

  constructor(private readonly maxChars: number) {}

  /** The view kept for `id` when it was built from the rows `key` names. */
  get(id: string, key: string): T | undefined {
    const e = this.entries.get(id);
    if (e === undefined) return undefined;
    if (e.key !== key) {
      // Its rows changed: never served again, so not held until it is rebuilt or pushed out.
      this.drop(id);
      return undefined;
    }
    // Most recently used last: the first entry is the one to drop.
    this.entries.delete(id);
    this.entries.set(id, e);
    return e.view;
  }

  /** Keeps `view` for `id` under `key` (frozen, its JSON noted, as text and bytes); answers it. */
  keep(id: string, key: string, view: T): T {
    const json = JSON.stringify(view);
    madeJson(deepFreeze(view), { text: json, bytes: Buffer.from(json) });
    this.drop(id);
    if (json.length > this.maxChars) return view;
    this.entries.set(id, { key, view, chars: json.length });
    this.chars += json.length;
    while (this.chars > this.maxChars) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.drop(oldest);
    }
    return view;
  }

  private drop(id: string): void {
    const e = this.entries.get(id);
    if (!e) return;
    this.chars -= e.chars;
    this.entries.delete(id);
  }
}
