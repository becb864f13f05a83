/**
 * The machine's test slots (support/machine-slots.ts): at most `slots` holders at once, a freed slot
 * taken by a waiter, a dead holder's slot taken back.
 */
import { existsSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { freeSlotsOf, takeTestSlot } from './support/machine-slots.ts';
import { tempDirsRemovedAfterAll } from './support/temp-dirs.ts';
import { waitFor } from './support/wait-for.ts';

const newDir = tempDirsRemovedAfterAll('slots-');

describe('machine test slots', () => {
  it('a third holder of two slots waits until one is freed, then takes it', async () => {
    const dir = newDir();
    const a = await takeTestSlot(2, dir);
    const b = await takeTestSlot(2, dir);
    let third: (() => void) | undefined;
    const waiting = takeTestSlot(2, dir).then((r) => (third = r));
    await new Promise((r) => setTimeout(r, 400));
    expect(third).toBeUndefined();
    a();
    await waiting;
    expect(third).toBeDefined();
    b();
    third!();
    expect(existsSync(join(dir, 'slot-0')) || existsSync(join(dir, 'slot-1'))).toBe(false);
  });

  it('a file that waits past the notice time says so once, naming the slots, their holders and the way out; one served at once says nothing', async () => {
    const dir = newDir();
    const said: string[] = [];
    const say = (line: string) => said.push(line);
    const held = await takeTestSlot(1, dir, { noticeAfterMs: 150, say });
    expect(said).toEqual([]);
    writeFileSync(join(dir, 'slot-0'), String(process.ppid)); // another run holds it (a live pid not ours)
    let waited: (() => void) | undefined;
    const waiting = takeTestSlot(1, dir, { noticeAfterMs: 150, say }).then((r) => (waited = r));
    await waitFor(() => said.length > 0);
    await new Promise((r) => setTimeout(r, 450)); // three more looks, and no second notice
    expect(said).toHaveLength(1);
    expect(said[0]).toContain("one of this machine's 1 test slots");
    expect(said[0]).toContain(`held by pid ${process.ppid}`);
    expect(said[0]).toContain('HERMES_TEST_SLOTS=0');
    expect(waited).toBeUndefined();
    held(); // not its slot any more: the other run's stays
    expect(existsSync(join(dir, 'slot-0'))).toBe(true);
    rmSync(join(dir, 'slot-0')); // the other run frees it
    await waiting;
    waited!();
    expect(said).toHaveLength(1);
  });

  it('a slot whose holder is gone is taken back; a live holder keeps its own', async () => {
    const dir = newDir();
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
    writeFileSync(join(dir, 'slot-0'), dead);
    const release = await takeTestSlot(1, dir);
    release();
    writeFileSync(join(dir, 'slot-0'), String(process.ppid));
    let taken = false;
    const waiting = takeTestSlot(1, dir).then((r) => ((taken = true), r));
    await new Promise((r) => setTimeout(r, 400));
    expect(taken).toBe(false);
    writeFileSync(join(dir, 'slot-0'), dead);
    (await waiting)();
  });

  it('an empty slot file is left to its writer while new, and taken back once old (its writer died before writing)', async () => {
    const dir = newDir();
    const path = join(dir, 'slot-0');
    writeFileSync(path, '');
    let taken = false;
    const waiting = takeTestSlot(1, dir).then((r) => ((taken = true), r));
    await new Promise((r) => setTimeout(r, 400));
    expect(taken).toBe(false);
    const old = new Date(Date.now() - 60_000);
    utimesSync(path, old, old);
    (await waiting)();
  });

  it("a process's slots left behind are freed for it, and no other's", async () => {
    const dir = newDir();
    await takeTestSlot(3, dir); // left behind: never released
    writeFileSync(join(dir, 'slot-1'), String(process.ppid));
    freeSlotsOf(process.pid, 3, dir);
    expect(existsSync(join(dir, 'slot-0'))).toBe(false);
    expect(existsSync(join(dir, 'slot-1'))).toBe(true);
  });

  it('with 0 slots nothing is shared: no slot file is written', async () => {
    const dir = newDir();
    (await takeTestSlot(0, join(dir, 'none')))();
    expect(existsSync(join(dir, 'none'))).toBe(false);
  });
});
