/**
 * Every setting the documentation names exists: a dotted key in backquotes whose first part is a
 * top-level section of the configuration (`loops.min_interval_seconds`, `agent.compaction.target`)
 * must be a path of the zod schema in scheduler/config/config.ts, so a renamed or removed setting
 * cannot live on in the docs.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configSchema } from '../scheduler/config/config.ts';

type Schema = { _zod: { def: { type: string } & Record<string, unknown> } };

/** The schema a wrapper (default, optional, preprocess, lazy …) stands for. */
function unwrap(schema: Schema): Schema {
  let cur = schema;
  for (;;) {
    const def = cur._zod.def as { type: string; innerType?: Schema; in?: Schema; out?: Schema; getter?: () => Schema };
    if (def.innerType) cur = def.innerType;
    else if (def.type === 'pipe' && def.in && def.out) cur = def.in._zod.def.type === 'transform' ? def.out : def.in;
    else if (def.type === 'lazy' && def.getter) cur = def.getter();
    else return cur;
  }
}

/** The schema of `key` under `schema` (any key of a record), or undefined. */
function child(schema: Schema, key: string): Schema | undefined {
  const def = unwrap(schema)._zod.def as { type: string; shape?: Record<string, Schema>; valueType?: Schema };
  if (def.type === 'object') return def.shape && Object.hasOwn(def.shape, key) ? def.shape[key] : undefined;
  if (def.type === 'record') return def.valueType;
  return undefined;
}

const root = configSchema() as unknown as Schema;
const sections = new Set(Object.keys((unwrap(root)._zod.def as unknown as { shape: object }).shape));
const docs = [
  'README.md',
  ...readdirSync('docs')
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** `[file, key]` for every dotted key in backquotes that starts with a config section. */
function namedSettings(): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const file of docs) {
    for (const m of readFileSync(file, 'utf8').matchAll(/`([a-z_]+(?:\.[a-z0-9_]+)+)`/g)) {
      if (sections.has(m[1]!.split('.')[0]!)) out.push([file, m[1]!]);
    }
  }
  return out;
}

describe('settings named in the docs', () => {
  const named = namedSettings();

  it('are found in the docs (the scan works)', () => {
    expect(named.length).toBeGreaterThan(100);
    expect(named).toContainEqual(['docs/DESIGN.md', 'loops.min_interval_seconds']);
  });

  it('each exists in the configuration schema', () => {
    const missing = named.filter(([, key]) => key.split('.').reduce<Schema | undefined>((s, k) => s && child(s, k), root) === undefined);
    expect(missing).toEqual([]);
  });

  it('a key that is not in the schema is caught (near misses of real keys)', () => {
    const resolves = (key: string) => key.split('.').reduce<Schema | undefined>((s, k) => s && child(s, k), root) !== undefined;
    expect(resolves('loops.min_interval_seconds')).toBe(true);
    expect(resolves('tools.schedules.allow_from')).toBe(true);
    expect(resolves('loops.min_interval')).toBe(false);
    expect(resolves('tools.schedules.allow')).toBe(false);
    expect(resolves('loops.min_interval_seconds.extra')).toBe(false);
  });
});
