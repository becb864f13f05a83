/**
 * Tables looked up by a name someone typed: a tool, a model, a command, a control word, a day, a unit.
 *
 * The rule: no name a user, an operator or a model gives is looked up on a plain object. A plain object
 * answers every member of `Object.prototype` — `constructor`, `toString`, `__proto__`, `hasOwnProperty`,
 * … — so in a plain `tools.commands` the name `constructor` finds `Object` itself instead of "no such
 * tool", and the code that goes on with it fails far from the input. A table is therefore one of:
 * - a `Map` or a `Set`;
 * - an object with no prototype: the config schema's records (`nameRecord`, scheduler/config/config.ts)
 *   and the product's own vocabularies (`nameTable`);
 * - any other record, read through `ownValue`.
 * `test/prototype-names.test.ts` sends every `Object.prototype` member through every entry point.
 */

/** A table that answers only the names it holds (no prototype). */
export type NameTable<V> = Readonly<Record<string, V>>;

/** `entries` as a frozen table with no prototype: a name it does not hold reads `undefined`, and `in` sees only its own names. */
export function nameTable<V>(entries: Readonly<Record<string, V>>): NameTable<V> {
  return Object.freeze(withoutPrototype(entries));
}

/** A writable copy of `record` with no prototype (the config schema's records: a parsed config may still be changed). */
export function withoutPrototype<V>(record: Readonly<Record<string, V>>): Record<string, V> {
  return Object.assign(Object.create(null) as Record<string, V>, record);
}

/** `record[name]` when `name` is one of the record's own keys; `undefined` otherwise, whatever its prototype holds. */
export function ownValue<V>(record: Readonly<Record<string, V>> | undefined, name: string): V | undefined {
  return record !== undefined && Object.hasOwn(record, name) ? record[name] : undefined;
}
