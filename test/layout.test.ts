/**
 * The design card's import rules (docs/DESIGN.md §2) and no import cycles:
 * scheduler/ imports none of the others; worker/ and gateway/ import
 * scheduler/ but never each other; nothing imports cli/, test/ or ops/.
 * Outside the tests, stores and services are built only by
 * scheduler/services.ts and Redis clients opened only by
 * scheduler/store/redis/connection-factory.ts.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { ROOT } from './support/stack.ts';

const FOLDERS = ['scheduler', 'worker', 'gateway', 'cli'];

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : /\.(ts|mjs)$/.test(name) ? [p] : [];
  });
}

function imports(file: string): string[] {
  const src = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of src.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+'(\.[^']+)'/gm)) out.push(resolve(dirname(file), m[1]!));
  for (const m of src.matchAll(/import\('(\.[^']+)'\)/g)) out.push(resolve(dirname(file), m[1]!));
  return out;
}

/** Every `.ts`/`.mjs` file under the given top-level folders. */
function* sources(folders: string[]): Generator<string> {
  for (const folder of folders) yield* files(join(ROOT, folder));
}

const graph = new Map<string, string[]>();
for (const folder of FOLDERS) for (const f of files(join(ROOT, folder))) graph.set(f, imports(f));
const top = (p: string) => relative(ROOT, p).split('/')[0]!;

describe('layout', () => {
  const allowed: Record<string, string[]> = {
    scheduler: ['scheduler'],
    worker: ['worker', 'scheduler'],
    gateway: ['gateway', 'scheduler'],
    cli: ['cli', 'scheduler', 'worker', 'gateway'],
  };
  it('each folder imports only what the design card allows', () => {
    expect(graph.size).toBeGreaterThan(50);
    expect([...graph.values()].flat().filter((d) => top(d) === 'scheduler').length).toBeGreaterThan(100);
    const bad: string[] = [];
    for (const [file, deps] of graph) {
      for (const d of deps) if (!allowed[top(file)]!.includes(top(d))) bad.push(`${relative(ROOT, file)} → ${relative(ROOT, d)}`);
    }
    expect(bad).toEqual([]);
  });

  it('has no import cycles', () => {
    const state = new Map<string, 'visiting' | 'done'>();
    const cycles: string[] = [];
    const visit = (f: string, path: string[]) => {
      if (state.get(f) === 'done') return;
      if (state.get(f) === 'visiting') {
        cycles.push([...path.slice(path.indexOf(f)), f].map((p) => relative(ROOT, p)).join(' → '));
        return;
      }
      state.set(f, 'visiting');
      for (const d of graph.get(f) ?? []) if (graph.has(d)) visit(d, [...path, f]);
      state.set(f, 'done');
    };
    for (const f of graph.keys()) visit(f, []);
    expect(cycles).toEqual([]);
  });

  it('only scheduler/store/defer-job.ts moves a job back to delayed (one deferJob)', () => {
    const files = [...sources(['scheduler', 'worker', 'gateway', 'cli', 'ops', 'test'])];
    expect(files.length).toBeGreaterThan(100);
    const bad = files
      .filter((f) => /\.moveToDelayed\s*\(/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(ROOT, f))
      .filter((f) => f !== 'scheduler/store/defer-job.ts');
    expect(bad).toEqual([]);
  });

  it('no product source holds Lua: scripts live in scheduler/store/redis/scripts/*.lua', () => {
    const bad = [...sources(['scheduler', 'worker', 'gateway', 'cli', 'ops'])]
      .filter((f) => f.endsWith('.ts') && /redis\.p?call\b/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(ROOT, f));
    expect(bad).toEqual([]);
  });

  it('builds stores and services only in services.ts, and opens Redis clients only in connection-factory.ts', () => {
    const product = [...sources([...FOLDERS, 'ops'])];
    const built = /new (LoopStore|LoopService|SessionStore|GoalService|RunStore|CronStore|CronService)\(/;
    const opened = /new (Redis|IORedis|Cluster)\(/;
    const bad: string[] = [];
    for (const file of product) {
      const name = relative(ROOT, file);
      const src = readFileSync(file, 'utf8');
      if (name !== 'scheduler/services.ts' && built.test(src)) bad.push(`${name}: ${built.exec(src)![0]}`);
      if (name !== 'scheduler/store/redis/connection-factory.ts' && opened.test(src)) bad.push(`${name}: ${opened.exec(src)![0]}`);
    }
    expect(product.length).toBeGreaterThan(100);
    expect(bad).toEqual([]);
  });

  it('file names are kebab-case', () => {
    const bad = [...graph.keys()].map((f) => relative(ROOT, f)).filter((f) => !/^[a-z0-9/.-]+$/.test(f));
    expect(bad).toEqual([]);
  });
});
