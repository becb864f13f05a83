/**
 * `read_file` and `list_dir` cannot be raced out of their roots: someone who
 * can write inside a root swaps a folder for a symlink leading out between the
 * tool's path check and its open. The opened descriptor is checked
 * (`/proc/self/fd`), so the outside content is never returned; without
 * `/proc` the tools refuse. (docs/TOOLS.md, "Files".)
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../scheduler/config/config.ts';
import { fileTools } from '../worker/tools/file-tools.ts';
import type { ScheduleStatusSources } from '../worker/tools/schedule-status-tool.ts';
import { Toolbox } from '../worker/tools/toolbox.ts';
import { ToolOutput } from '../worker/tools/tool-output.ts';

/**
 * How many times each tool must be caught by the swap between its path check and its open (`changed`,
 * or `outside` where the check fails) before the race stops. The race keeps two threads busy while it runs
 * (10 s cost ~12 CPU-s), so it stops as soon as it has proved the check, not after a fixed time: on 2 cores
 * 2 s hit the window 44–83 times per tool at load 4, 20 hits took 5–10 s at load 10, and beside two other
 * copies of the suite (load 25–30) 2 s did not hit it once. With the descriptor check removed, 3–22 of
 * every 21–48 hits per tool returned outside content or listings (one in nine at the fewest), so 30 hits
 * without one outside result are no luck.
 */
const HITS_PER_TOOL = 30;

/** Longest the race runs before it counts as not live (the test then fails on its hits). */
const RACE_LIMIT_MS = 90_000;

let dir: string;
let root: string;
let outside: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'hermes-race-'));
  root = join(dir, 'root');
  outside = join(dir, 'outside');
  mkdirSync(join(root, 'swap'), { recursive: true });
  writeFileSync(join(root, 'swap', 'f'), 'inside');
  mkdirSync(join(root, 'swap', 'd'));
  writeFileSync(join(root, 'swap', 'd', 'inside-entry'), '');
  mkdirSync(outside);
  writeFileSync(join(outside, 'f'), 'SECRET-OUTSIDE');
  mkdirSync(join(outside, 'd'));
  writeFileSync(join(outside, 'd', 'outside-entry'), '');
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const ctx = { sessionId: 's', surface: 'chat' as const, signal: new AbortController().signal };

describe('read_file and list_dir under a directory-swap race', () => {
  it(
    `a folder swapped for a symlink to outside, back and forth until each tool is caught in the swap ${HITS_PER_TOOL} times, never yields outside content`,
    async () => {
      const config = loadConfig({ env: { HERMES_HOME: dir }, overrides: { tools: { files: { roots: [root] }, timeout_seconds: 30 } } });
      const tools = new Toolbox(config, {} as ScheduleStatusSources);
      const swap = join(root, 'swap');
      const parked = join(root, 'parked');
      const flag = new Int32Array(new SharedArrayBuffer(4));
      let stop = false;

      // The attacker, on a thread of its own so it runs while the tool runs: the real folder and a
      // symlink to `outside` take turns at `root/swap`, each held ~20 µs (about the tool's time from
      // its path check to its open). Against the tool without the descriptor check this returned the
      // outside content 15-60 times in 10 s (an async loop on the tool's own thread pool: about once).
      const swapper = new Worker(
        `const { parentPort, workerData: { swap, parked, outside, flag, holdNs } } = require('node:worker_threads');
      const fs = require('node:fs');
      // each state is held about as long as the tool takes from its check to its open
      const hold = () => { const until = process.hrtime.bigint() + BigInt(holdNs); while (process.hrtime.bigint() < until); };
      let swaps = 0;
      while (Atomics.load(flag, 0) === 0) {
        fs.renameSync(swap, parked);
        fs.symlinkSync(outside, swap);
        hold();
        fs.unlinkSync(swap);
        fs.renameSync(parked, swap);
        hold();
        swaps++;
      }
      parentPort.postMessage(swaps);`,
        { eval: true, workerData: { swap, parked, outside, flag, holdNs: 20_000 } },
      );
      const swapped = new Promise<number>((resolve, reject) => {
        swapper.once('message', resolve);
        swapper.once('error', reject);
      });

      // `changed`: the path passed the check and was swapped before or at the open (caught on the descriptor)
      const reads = { inside: 0, outside: 0, changed: 0, refused: 0, failed: 0 };
      const lists = { inside: 0, outside: 0, changed: 0, refused: 0, failed: 0 };
      const reader = (async () => {
        while (!stop) {
          const r = await tools.call('read_file', JSON.stringify({ path: 'swap/f' }), ctx);
          if (r.content.includes('SECRET')) reads.outside++;
          else if (r.content === 'inside') reads.inside++;
          else if (r.content.endsWith('changed while it was being opened; nothing was read.')) reads.changed++;
          else if (r.error?.kind === 'refused') reads.refused++;
          else reads.failed++;
        }
      })();
      const lister = (async () => {
        while (!stop) {
          const r = await tools.call('list_dir', JSON.stringify({ path: 'swap/d' }), ctx);
          if (r.content.includes('outside-entry')) lists.outside++;
          else if (r.content === 'inside-entry') lists.inside++;
          else if (r.content.endsWith('changed while it was being opened; nothing was read.')) lists.changed++;
          else if (r.error?.kind === 'refused') lists.refused++;
          else lists.failed++;
        }
      })();

      // Until each tool was caught between its check and its open often enough, and went through inside.
      const started = Date.now();
      const enough = (c: typeof reads) => c.changed + c.outside >= HITS_PER_TOOL && c.inside > 0;
      while (!(enough(reads) && enough(lists)) && Date.now() - started < RACE_LIMIT_MS) await new Promise((r) => setTimeout(r, 50));
      const raceMs = Date.now() - started;
      stop = true;
      Atomics.store(flag, 0, 1);
      const [swaps] = await Promise.all([swapped, reader, lister]);
      await swapper.terminate();
      console.info(
        `directory-swap race, ${raceMs} ms, ${swaps} swaps: read_file ${JSON.stringify(reads)}, list_dir ${JSON.stringify(lists)}`,
      );

      expect(reads.outside).toBe(0);
      expect(lists.outside).toBe(0);
      // The race was live: each tool went through inside, and had its path swapped between check and open.
      expect(reads.inside).toBeGreaterThan(0);
      expect(lists.inside).toBeGreaterThan(0);
      expect(reads.changed).toBeGreaterThanOrEqual(HITS_PER_TOOL);
      expect(lists.changed).toBeGreaterThanOrEqual(HITS_PER_TOOL);
      expect(swaps).toBeGreaterThan(100);
    },
    RACE_LIMIT_MS + 30_000,
  );

  it('where the open descriptor cannot be checked (no /proc), every path is refused with a clear message', async () => {
    const [readFile, listDir] = fileTools([root], { fdDirs: [join(dir, 'no-proc', 'self', 'fd')] });
    const call = () => ({ ...ctx, output: new ToolOutput({ maxBytes: 1000, headShare: 0.25, fileReadBytes: 1 << 20 }), timeoutMs: 30_000 });
    await expect(readFile!.call({ path: 'swap/f' }, call())).rejects.toMatchObject({
      kind: 'refused',
      message: `Refused: cannot check where swap/f was opened: ${join(dir, 'no-proc', 'self', 'fd')} is not available, and without it read_file refuses every path.`,
    });
    await expect(listDir!.call({ path: 'swap' }, call())).rejects.toMatchObject({
      kind: 'refused',
      message: expect.stringContaining('list_dir refuses every path'),
    });
    // with /proc, the same calls read
    const [readWithProc] = fileTools([root]);
    const read = await readWithProc!.call({ path: 'swap/f' }, call());
    expect(typeof read === 'string' ? read : read.render().content).toBe('inside');
  });
});
