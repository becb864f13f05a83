/**
 * The design card's import rules (docs/DESIGN.md §2) and no import cycles:
 * scheduler/ imports none of the others; worker/ and gateway/ import
 * scheduler/ but never each other; nothing imports cli/, test/ or ops/.
 * Outside the tests, stores and services are built only by
 * scheduler/services.ts and Redis clients opened only by
 * scheduler/store/redis/connection-factory.ts. Inside scheduler/, the pure
 * state modules reach no Redis or BullMQ module and the concept packages import
 * each other in no cycle. At most ten files sit at the root of scheduler/,
 * worker/ and gateway/; inside worker/, folders import only the layers below
 * them (worker/README.md).
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

/** What `file` imports, types included: relative paths resolved, packages by name (`bullmq`). */
function imports(file: string, options: { packages?: boolean } = {}): string[] {
  const src = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of src.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+'([^']+)'/gm)) out.push(m[1]!);
  for (const m of src.matchAll(/import\('([^']+)'\)/g)) out.push(m[1]!);
  return out.filter((d) => options.packages || d.startsWith('.')).map((d) => (d.startsWith('.') ? resolve(dirname(file), d) : d));
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

  /**
   * The pure state modules: what is due and what the state becomes, as functions of their inputs
   * (STYLE: "scheduler/ decides … as pure functions with no I/O; worker/ does the I/O around them").
   * Neither they nor anything they import, types included, may reach `ioredis` or `bullmq`, so no
   * store, queue or connection module can creep into them.
   */
  const PURE = [
    'scheduler/loop/loop-state.ts',
    'scheduler/loop/self-paced.ts',
    'scheduler/loop/wakeup-input.ts',
    'scheduler/loop/prefetch-lead.ts',
    'scheduler/loop/loop-command.ts',
    'scheduler/loop/heartbeat-command.ts',
    'scheduler/loop/loop-record-codec.ts',
    'scheduler/goal/goal-state.ts',
    'scheduler/goal/goal-command.ts',
    'scheduler/cron/cron-job.ts',
    'scheduler/cron/cron-record-codec.ts',
    'scheduler/cron/misfire.ts',
    'scheduler/cron/jitter.ts',
    'scheduler/cron/cron-engine.ts',
    'scheduler/cron/cron-fields.ts',
    'scheduler/cron/schedule-grammar.ts',
    'scheduler/cron/cron-notice.ts',
    'scheduler/cron/job-ref.ts',
    'scheduler/delivery/delivery-target.ts',
    'scheduler/interval.ts',
    'scheduler/model-spend.ts',
    'scheduler/schedule-policy/schedule-policy.ts',
    'worker/loop/tick-gate.ts',
    'worker/cron/cron-gate.ts',
    'worker/occurrence/defer-decision.ts',
    'worker/occurrence/due-time.ts',
    'worker/occurrence/turn-ending.ts',
  ];
  const IO_PACKAGES = /^(ioredis|bullmq)(\/|$)/;

  it('pure state modules reach no Redis or BullMQ module', () => {
    const bad: string[] = [];
    for (const rel of PURE) {
      const start = join(ROOT, rel);
      expect(graph.has(start), `${rel} exists`).toBe(true);
      // Depth-first over every import, remembering the path for the message.
      const seen = new Set<string>();
      const stack: Array<{ file: string; path: string[] }> = [{ file: start, path: [rel] }];
      while (stack.length > 0) {
        const { file, path } = stack.pop()!;
        if (seen.has(file)) continue;
        seen.add(file);
        for (const d of imports(file, { packages: true })) {
          if (IO_PACKAGES.test(d)) bad.push([...path, d].join(' → '));
          else if (graph.has(d)) stack.push({ file: d, path: [...path, relative(ROOT, d)] });
        }
      }
    }
    expect(bad).toEqual([]);
  });

  /**
   * A concept package is a folder of scheduler/ (its subfolders belong to it: `store/redis/` is
   * `store`); each file at the root stands alone. Type imports count: a package that needs another's
   * type depends on it as much as on its functions, so the packages read as layers.
   */
  const packageOf = (file: string) => {
    const parts = relative(ROOT, file).split('/');
    return parts.length > 2 ? parts.slice(0, 2).join('/') : parts.join('/');
  };
  it('scheduler/ packages import each other in no cycle', () => {
    const edges = new Map<string, Map<string, string>>();
    for (const file of graph.keys()) {
      if (top(file) !== 'scheduler') continue;
      for (const d of imports(file)) {
        const from = packageOf(file),
          to = packageOf(d);
        const why = `${relative(ROOT, file)} → ${relative(ROOT, d)}`;
        if (from === to || top(d) !== 'scheduler') continue;
        if (!edges.has(from)) edges.set(from, new Map());
        if (!edges.get(from)!.has(to)) edges.get(from)!.set(to, why);
      }
    }
    expect(edges.size).toBeGreaterThan(5);
    const cycles: string[] = [];
    const state = new Map<string, 'visiting' | 'done'>();
    const visit = (p: string, path: string[]) => {
      if (state.get(p) === 'done') return;
      if (state.get(p) === 'visiting') {
        const loop = [...path.slice(path.indexOf(p)), p];
        cycles.push(
          loop
            .slice(1)
            .map((q, i) => edges.get(loop[i]!)!.get(q)!)
            .join(', '),
        );
        return;
      }
      state.set(p, 'visiting');
      for (const q of edges.get(p)?.keys() ?? []) visit(q, [...path, p]);
      state.set(p, 'done');
    };
    for (const p of edges.keys()) visit(p, []);
    expect(cycles).toEqual([]);
  });

  it.each(['scheduler', 'worker', 'gateway'])(
    '%s/ keeps at most ten files at its root (the rest live in its concept folders)',
    (folder) => {
      const rootFiles = readdirSync(join(ROOT, folder)).filter((n) => !statSync(join(ROOT, folder, n)).isDirectory());
      expect(rootFiles.length, rootFiles.join(', ')).toBeLessThanOrEqual(10);
    },
  );

  /**
   * Inside worker/ (worker/README.md, "Folders"): a folder imports only the layers below it, and the
   * kinds of job never import each other. Layers top down; a layer's folders import each other only
   * where paired. `worker-deps.ts` is the contract every folder may import.
   */
  const WORKER_LAYERS: string[][] = [
    ['worker-process.ts'],
    ['create-worker-deps.ts'],
    ['loop', 'cron', 'chat', 'v1'],
    ['occurrence'],
    ['context', 'turn-runners'],
    ['tools'],
    ['runtime'],
  ];
  const WORKER_PAIRED = new Set(['context → turn-runners', 'turn-runners → context']);
  /** A worker file's folder (`loop`), or its name when it sits at the root (`worker-process.ts`). */
  const workerUnit = (file: string) => relative(join(ROOT, 'worker'), file).split('/')[0]!;
  const layerOf = (unit: string) => WORKER_LAYERS.findIndex((layer) => layer.includes(unit));

  it('worker/ folders import only the layers below them', () => {
    const units = new Set([...graph.keys()].filter((f) => top(f) === 'worker').map(workerUnit));
    // Every folder and root file is placed in a layer (or is the contract).
    expect([...units].filter((u) => u !== 'worker-deps.ts' && layerOf(u) < 0)).toEqual([]);
    const bad: string[] = [];
    let edges = 0;
    for (const [file, deps] of graph) {
      if (top(file) !== 'worker') continue;
      const from = workerUnit(file);
      for (const d of deps) {
        if (top(d) !== 'worker') continue;
        const to = workerUnit(d);
        if (to === from || to === 'worker-deps.ts') continue;
        edges++;
        const ok =
          from === 'worker-deps.ts'
            ? layerOf(to) > layerOf('create-worker-deps.ts')
            : layerOf(to) > layerOf(from) || WORKER_PAIRED.has(`${from} → ${to}`);
        if (!ok) bad.push(`${relative(ROOT, file)} → ${relative(ROOT, d)}`);
      }
    }
    expect(edges).toBeGreaterThan(50);
    expect(bad).toEqual([]);
  });
});
