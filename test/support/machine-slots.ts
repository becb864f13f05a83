/**
 * Test slots shared by every run of the suite on one machine, like make's job server: a test file
 * runs only while it holds one of `TEST_SLOTS` slot files in the machine's temp folder. Alone, the
 * suite's six workers (vitest.config.ts) each find one free. Beside other copies of the suite, the
 * copies share the slots instead of putting three times as many files on the cores: at 18 files on
 * 2 cores every wait stretched past its ceiling (three clones at once: 15–24 failures per copy, 1,079 s
 * per run). A slot is a file created exclusively and holding its owner's pid; one whose owner is gone
 * (a run killed) is taken back by the next file that finds it.
 */
import { closeSync, mkdirSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Slots on this machine: `HERMES_TEST_SLOTS`, or three per core (the six workers the suite was measured
 * fastest with on 2 cores: docs/BENCHMARKS.md, "Test suite"). 0 turns the sharing off.
 */
export const TEST_SLOTS = process.env.HERMES_TEST_SLOTS !== undefined ? Number(process.env.HERMES_TEST_SLOTS) : 3 * availableParallelism();

/** The folder of the slot files, one per user (a run as another user never waits on ours). */
export const SLOT_DIR = join(tmpdir(), `hermes-test-slots-${process.getuid?.() ?? 'u'}`);

/** How often a waiting file looks for a free slot, ms (plus up to as much again at random, so waiters spread). */
const POLL_MS = 100;

/** How old an empty slot file is when its owner is taken to have died before writing its pid, ms. */
const EMPTY_SLOT_STALE_MS = 10_000;

/** Whether the process `pid` is alive (a pid of another user's process is alive too: EPERM). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Take slot `path` if it is free, or if its owner is gone; true when it is ours. */
function tryTake(path: string): boolean {
  try {
    const fd = openSync(path, 'wx');
    try {
      writeSync(fd, String(process.pid));
    } finally {
      closeSync(fd);
    }
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  let owner: number;
  let ageMs: number;
  try {
    owner = Number(readFileSync(path, 'utf8'));
    ageMs = Date.now() - statSync(path).mtimeMs;
  } catch {
    return false; // released meanwhile: taken at the next look
  }
  // A dead owner's slot is freed for the next look. An empty file is one its owner is writing right now, or one
  // whose owner died between creating and writing it: freed once it is older than any such write could take.
  const stale = owner > 0 ? Number.isInteger(owner) && !alive(owner) : ageMs > EMPTY_SLOT_STALE_MS;
  if (stale) {
    try {
      unlinkSync(path);
    } catch {
      /* freed by another waiter */
    }
  }
  return false;
}

/**
 * Free the slots `pid` holds in `dir`. A vitest worker runs one file at a time, so a slot it still holds when its
 * next file starts was left by a file that ended without its `afterAll` (slot-setup.ts): without this it would
 * stay taken for the whole run.
 */
export function freeSlotsOf(pid: number, slots = TEST_SLOTS, dir = SLOT_DIR): void {
  for (let k = 0; k < slots; k++) {
    const path = join(dir, `slot-${k}`);
    try {
      if (readFileSync(path, 'utf8') === String(pid)) unlinkSync(path);
    } catch {
      /* free, or freed meanwhile */
    }
  }
}

/** How long a file waits for a slot before it says so, ms (a wait this long is other runs of the suite, not this one). */
const WAIT_NOTICE_MS = 20_000;

/** What a file that has waited {@link WAIT_NOTICE_MS} for a slot says once (stderr): why, and how to turn it off. */
export function slotWaitNotice(slots: number, dir: string): string {
  const holders = Array.from({ length: slots }, (_, k) => {
    try {
      return readFileSync(join(dir, `slot-${k}`), 'utf8');
    } catch {
      return '';
    }
  }).filter((pid) => pid !== '' && pid !== String(process.pid));
  return (
    `waiting for one of this machine's ${slots} test slots (${dir}; held by pid ${[...new Set(holders)].join(', ') || 'none now'}): ` +
    `other runs of the suite share them. HERMES_TEST_SLOTS=0 turns the sharing off (test/README.md).\n`
  );
}

/**
 * Wait for a free slot and hold it; a wait longer than `noticeAfterMs` is told once with `say` (stderr by default).
 * @param slots - slots on the machine; 0: none are shared, the call returns at once
 * @returns a function that frees the slot (again: nothing)
 */
export async function takeTestSlot(
  slots = TEST_SLOTS,
  dir = SLOT_DIR,
  {
    noticeAfterMs = WAIT_NOTICE_MS,
    say = (line: string): unknown => process.stderr.write(line),
  }: { noticeAfterMs?: number; say?: (line: string) => unknown } = {},
): Promise<() => void> {
  if (!(slots > 0)) return () => {};
  mkdirSync(dir, { recursive: true });
  const noticeAt = Date.now() + noticeAfterMs;
  let told = false;
  for (;;) {
    for (let k = 0; k < slots; k++) {
      const path = join(dir, `slot-${k}`);
      if (!tryTake(path)) continue;
      let held = true;
      return () => {
        if (!held) return;
        held = false;
        try {
          if (readFileSync(path, 'utf8') === String(process.pid)) unlinkSync(path);
        } catch {
          /* already taken back */
        }
      };
    }
    if (!told && Date.now() >= noticeAt) {
      told = true;
      say(slotWaitNotice(slots, dir));
    }
    await sleep(POLL_MS + Math.random() * POLL_MS);
  }
}
