// `include_related` of the audit API follows the spec's relation table; each resource type
// plugs in a resolver that returns the URIs related to one of its objects (itself included).
import { type ParsedUri, parseObjectUri } from "../domain/uri.ts";
import type { Store } from "../store/store.ts";

export type RelationResolver = (store: Store, uri: string, parsed: ParsedUri) => Promise<string[]>;

export class Relations {
  private readonly resolvers = new Map<string, RelationResolver>();

  register(resource: string, resolver: RelationResolver): void {
    this.resolvers.set(resource, resolver);
  }

  /** The object and its related objects' URIs; an unknown kind relates only to itself. */
  async related(store: Store, uri: string): Promise<string[]> {
    const parsed = parseObjectUri(uri);
    const resolver = parsed ? this.resolvers.get(parsed.resource) : undefined;
    if (!parsed || !resolver) return [uri];
    const found = await resolver(store, uri, parsed);
    return [...new Set([uri, ...found])];
  }
}
