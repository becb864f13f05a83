/**
 * One casing on every wire: what a client is handed — `/api` answers, the event streams
 * (`/api/sessions/:id/events`), the CLI's `--json`, MCP results and resources, webhook bodies — names
 * its fields in snake_case (`session_id`, `occurrence_id`, `input_tokens`). What the product keeps in
 * Redis (records, event streams, journals) is no wire format: it keeps its own names, mostly camelCase
 * (`occurrenceId`, `dueAt`), and is read that way by the workers and the gateway. The views
 * (`scheduler/loop/schedule-view.ts`, `cronJobView`, `setAsideView`, …) spell their fields by hand;
 * data that is handed on as stored (event data, spend totals) goes through `wireKeys` at the boundary.
 */

/** A name in snake_case: each capital becomes `_` and its lower case (`dueAt` → `due_at`); a snake_case name stays. */
export type SnakeCase<S extends string> = S extends `${infer C}${infer Rest}`
  ? `${C extends Lowercase<C> ? C : `_${Lowercase<C>}`}${SnakeCase<Rest>}`
  : S;

/** `T` with every key, at every depth, in snake_case (`wireKeys`'s result). */
export type WireKeys<T> = T extends readonly (infer U)[]
  ? WireKeys<U>[]
  : T extends object
    ? { [K in keyof T as K extends string ? SnakeCase<K> : K]: WireKeys<T[K]> }
    : T;

/** `name` in snake_case (`SnakeCase`). */
export function snakeCase(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/**
 * `value` with the keys of every plain object in it, at any depth and inside arrays, in snake_case;
 * everything else as it is. For JSON data only (what `JSON.parse` gives): strings — user text, tool
 * arguments — are never looked into.
 */
export function wireKeys<T>(value: T): WireKeys<T> {
  if (Array.isArray(value)) return value.map((v: unknown) => wireKeys(v)) as WireKeys<T>;
  if (value === null || typeof value !== 'object') return value as WireKeys<T>;
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value as WireKeys<T>;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[snakeCase(k)] = wireKeys(v);
  return out as WireKeys<T>;
}
