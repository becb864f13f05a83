/**
 * The chaos run's definitions (ops/chaos/measure.ts) on small recorded
 * histories: what counts as run, covered, missed, duplicate, recovery,
 * duplicate reply and out of order.
 */
import { describe, expect, it } from 'vitest';
import {
  countDoubleEffects,
  countDuplicates,
  countLoopSlots,
  countReplies,
  keyFamily,
  memoryGrowthPerThousandTicks,
  p99,
  recoveryTimes,
  type TickCommit,
} from '../ops/chaos/measure.ts';

const tick = (occ: string, tickNo: number, dueAt: number, startedAt = dueAt, pid = 1, sessionId = 's'): TickCommit => ({
  sessionId,
  occurrenceId: occ,
  tick: tickNo,
  dueAt,
  startedAt,
  pid,
});

describe('chaos counts', () => {
  it('slots: run, covered by a tick that started after they were due, otherwise missed', () => {
    // interval 10: ticks due 0, 10, then 40 (slot 20 covered: tick 10 started at 25; slot 30 missed)
    const s = countLoopSlots([tick('a', 1, 0), tick('b', 2, 10, 25), tick('c', 3, 40)], 10, 45);
    expect(s).toEqual({ occurrences: 5, run: 3, covered: 1, missed: 1 });
    // a slot after the last tick but inside the window is missed too
    expect(countLoopSlots([tick('a', 1, 0)], 10, 25)).toEqual({ occurrences: 3, run: 1, covered: 0, missed: 2 });
  });

  it('duplicates: an occurrence committed twice, and two occurrences with one tick number', () => {
    expect(countDuplicates([tick('a', 1, 0), tick('a', 1, 0), tick('b', 2, 10), tick('c', 2, 20)])).toEqual({
      committedTwice: 1,
      repeatedTick: 1,
    });
    expect(countDuplicates([tick('a', 1, 0), tick('a', 1, 0, 0, 1, 'other')])).toEqual({ committedTwice: 0, repeatedTick: 0 });
  });

  it('recovery: from the kill to the next start of an uncommitted tick elsewhere', () => {
    const starts = [
      { sessionId: 's', occurrenceId: 'a', startedAt: 100, pid: 7 },
      { sessionId: 's', occurrenceId: 'a', startedAt: 1600, pid: 8 },
      { sessionId: 's', occurrenceId: 'b', startedAt: 90, pid: 7 },
    ];
    const commits = [tick('a', 1, 100, 1600, 8), tick('b', 1, 90, 90, 7, 's')];
    expect(recoveryTimes([{ pid: 7, at: 200 }], starts, commits)).toEqual({ samples: [1400], unrecovered: 0 });
    expect(p99([5, 1, 3])).toBe(5);
  });

  it('replies: a part accepted twice is a duplicate; a part queued later and accepted earlier is out of order', () => {
    const long = `${'x'.repeat(4095)}\nend`;
    const queued = [
      { chatId: '1', occurrenceId: 'r1', text: long, seq: 1 },
      { chatId: '1', occurrenceId: 'r2', text: 'notice', seq: 2 },
    ];
    // The gateway cuts at the line break and keeps it with the first part (their texts joined are the reply).
    const inOrder = [
      { chat_id: '1', text: `${'x'.repeat(4095)}\n` },
      { chat_id: '1', text: 'end' },
      { chat_id: '1', text: 'notice' },
    ];
    expect(countReplies(inOrder, queued)).toMatchObject({ parts: 3, duplicateReplies: 0, outOfOrder: 0, unsentParts: 0 });
    const between = [inOrder[0]!, inOrder[2]!, inOrder[1]!, inOrder[1]!];
    expect(countReplies(between, queued)).toMatchObject({ duplicateReplies: 1, outOfOrder: 1, unsentParts: 0 });
  });

  it('key families: every id segment is one *, the words and the hash tag stay', () => {
    expect(keyFamily('{hermes}:session:chaos-7:events')).toBe('{…}:session:*:events');
    expect(keyFamily('{hermes:3}:session:telegram%3A1001:committed')).toBe('{…}:session:*:committed');
    expect(keyFamily('{hermes}:bull:ticks:repeat:loop%3Achaos-7:1764600000000')).toBe('{…}:bull:ticks:repeat:*:*');
    expect(keyFamily('{hermes}:bull:ticks:delayed')).toBe('{…}:bull:ticks:delayed');
  });

  it('memory growth: the slope of used memory over ticks in the second half of the samples', () => {
    const at = (ticksStarted: number, usedMemoryBytes: number) => ({ at: 0, keys: 0, ticksStarted, usedMemoryBytes });
    // warm-up climbs steeply, then 50 B per tick
    const growing = [at(0, 1e6), at(1000, 3e6), at(2000, 3.05e6), at(3000, 3.1e6), at(4000, 3.15e6), at(5000, 3.2e6)];
    expect(memoryGrowthPerThousandTicks(growing)).toEqual({ bytesPerThousandTicks: 50_000, ticks: 2000 });
    const flat = [at(0, 1e6), at(1000, 3e6), at(2000, 3e6), at(3000, 3.001e6), at(4000, 2.999e6), at(5000, 3e6)];
    expect(memoryGrowthPerThousandTicks(flat).bytesPerThousandTicks).toBe(-500);
    expect(memoryGrowthPerThousandTicks([at(0, 1), at(1, 2)])).toEqual({ bytesPerThousandTicks: null, ticks: 0 });
  });
});

describe('countDoubleEffects', () => {
  it('counts each extra line of a tick, not ticks of different sessions or numbers', () => {
    expect(countDoubleEffects('a 1\nb 1\na 2\n')).toBe(0);
    expect(countDoubleEffects('a 1\na 1\nb 1\na 1\n\n')).toBe(2);
    expect(countDoubleEffects('')).toBe(0);
  });
});
