// Small pure helpers over collections, shared by every layer.

/** Appends `value` to the list of `key` in `map` (Map.groupBy needs Node 21). */
export function addTo<K, T>(map: Map<K, T[]>, key: K, value: T): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
