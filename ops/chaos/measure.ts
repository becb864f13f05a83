/**
 * The chaos run's counts, as pure functions over what was recorded (session
 * event streams, cron run records, outbound send records, and the messages the
 * local Telegram server accepted) — never over logs. Definitions:
 *
 * - occurrence: a slot of a loop's cadence (every `intervalMs` from its first
 *   committed tick) that fell inside the measured window;
 * - run: a committed tick (`reply` or `tick.failed` event) with that due time;
 * - covered (the documented coalescing rule, scheduler/loop/loop-state.ts): a slot
 *   due while the previous tick had not started yet (due after it, at or before
 *   its start) — that tick covers it;
 * - missed: neither run nor covered;
 * - duplicate: an occurrence committed more than once, or two different
 *   occurrences of a loop committed with the same tick number;
 * - recovery: from a worker's SIGKILL to the restart, on another worker, of a
 *   tick it had started and not committed;
 * - duplicate reply: a Telegram part (reply, part index) accepted twice;
 * - out of order: a part accepted after a part that was queued later in the
 *   same chat (queue order: the reply's registration number, then part index).
 */
import { renderMarkdown, splitFormatted } from '../../gateway/telegram/render-markdown.ts';

/** A committed loop tick, from its `reply` / `tick.failed` event. */
export interface TickCommit {
  sessionId: string;
  occurrenceId: string;
  tick: number;
  dueAt: number;
  startedAt: number;
  pid: number;
}

/** A `tick.started` event. */
export interface TickStart {
  sessionId: string;
  occurrenceId: string;
  startedAt: number;
  pid: number;
}

/** 99th percentile (nearest rank); 0 for no samples. */
export function p99(samples: number[]): number {
  if (samples.length === 0) return 0;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)]!;
}

/**
 * Count the slots of one loop up to `windowEndMs`.
 * @param commits - the loop's committed ticks (any order, duplicates allowed)
 */
export function countLoopSlots(
  commits: TickCommit[],
  intervalMs: number,
  windowEndMs: number,
): { occurrences: number; run: number; covered: number; missed: number } {
  const byDue = new Map<number, TickCommit>();
  for (const c of commits) if (!byDue.has(c.dueAt)) byDue.set(c.dueAt, c);
  const ticks = [...byDue.values()].sort((a, b) => a.dueAt - b.dueAt);
  if (ticks.length === 0) return { occurrences: 0, run: 0, covered: 0, missed: 0 };
  let run = 0;
  let covered = 0;
  let missed = 0;
  const tolerance = Math.min(1000, intervalMs / 4);
  for (let i = 0; i < ticks.length; i++) {
    const t = ticks[i]!;
    if (t.dueAt <= windowEndMs) run++;
    const nextDue = ticks[i + 1]?.dueAt ?? Number.POSITIVE_INFINITY;
    // Slots between this tick and the next committed one (or the window's end).
    for (let s = t.dueAt + intervalMs; s < nextDue - tolerance && s <= windowEndMs; s += intervalMs) {
      if (s <= t.startedAt) covered++;
      else missed++;
    }
  }
  return { occurrences: run + covered + missed, run, covered, missed };
}

/** Occurrences committed more than once, plus distinct occurrences of one loop sharing a tick number. */
export function countDuplicates(commits: TickCommit[]): { committedTwice: number; repeatedTick: number } {
  const byOcc = new Map<string, number>();
  const ticks = new Map<string, Set<string>>();
  for (const c of commits) {
    const key = `${c.sessionId}\u0000${c.occurrenceId}`;
    byOcc.set(key, (byOcc.get(key) ?? 0) + 1);
    const tk = `${c.sessionId}\u0000${c.tick}`;
    if (!ticks.has(tk)) ticks.set(tk, new Set());
    ticks.get(tk)!.add(c.occurrenceId);
  }
  let committedTwice = 0;
  for (const n of byOcc.values()) if (n > 1) committedTwice += n - 1;
  let repeatedTick = 0;
  for (const s of ticks.values()) if (s.size > 1) repeatedTick += s.size - 1;
  return { committedTwice, repeatedTick };
}

/**
 * Ticks whose command's last step — its side effect, a `<session> <tick>` line — ran more than once.
 * @param effects - the side-effect file, one line per finished command
 */
export function countDoubleEffects(effects: string): number {
  const seen = new Map<string, number>();
  for (const line of effects.split('\n')) if (line.trim() !== '') seen.set(line.trim(), (seen.get(line.trim()) ?? 0) + 1);
  let twice = 0;
  for (const n of seen.values()) if (n > 1) twice += n - 1;
  return twice;
}

/**
 * Recovery times after worker kills: for each kill, every tick the killed pid
 * had started and not committed, to its next start by another pid.
 * @returns samples in ms, and ticks never restarted (nor committed) afterwards
 */
export function recoveryTimes(
  kills: Array<{ pid: number; at: number }>,
  starts: TickStart[],
  commits: TickCommit[],
): { samples: number[]; unrecovered: number } {
  const committedBy = new Map<string, number>();
  for (const c of commits) committedBy.set(`${c.sessionId}\u0000${c.occurrenceId}`, c.pid);
  const samples: number[] = [];
  let unrecovered = 0;
  for (const k of kills) {
    const inFlight = new Set<string>();
    for (const s of starts) {
      const key = `${s.sessionId}\u0000${s.occurrenceId}`;
      if (s.pid === k.pid && s.startedAt <= k.at && committedBy.get(key) !== k.pid) inFlight.add(key);
    }
    for (const key of inFlight) {
      const next = starts
        .filter((s) => `${s.sessionId}\u0000${s.occurrenceId}` === key && s.pid !== k.pid && s.startedAt >= k.at)
        .sort((a, b) => a.startedAt - b.startedAt)[0];
      if (next) samples.push(next.startedAt - k.at);
      else if (!committedBy.has(key)) unrecovered++;
    }
  }
  return { samples, unrecovered };
}

/** A committed reply to a Telegram chat, with its place in the chat's queue order. */
export interface QueuedReply {
  chatId: string;
  occurrenceId: string;
  text: string;
  /** Registration number (`seq` of its send record); `null` when unknown. */
  seq: number | null;
}

/**
 * Compare what Telegram accepted with what was queued.
 * @param sent - accepted messages in acceptance order
 */
export function countReplies(
  sent: Array<{ chat_id: string; text: string }>,
  queued: QueuedReply[],
): {
  parts: number;
  duplicateReplies: number;
  outOfOrder: number;
  unsentParts: number;
  otherMessages: number;
} {
  const partOf = new Map<string, { occ: string; part: number; seq: number | null }>();
  let parts = 0;
  for (const r of queued) {
    // The parts exactly as the gateway cuts them (Markdown rendered, then split).
    splitFormatted(renderMarkdown(r.text.trim()))
      .map((p) => p.text)
      .forEach((p, i) => {
        partOf.set(`${r.chatId}\u0000${p}`, { occ: r.occurrenceId, part: i, seq: r.seq });
        parts++;
      });
  }
  const seen = new Set<string>();
  const maxByChat = new Map<string, [number, number]>();
  let duplicateReplies = 0;
  let outOfOrder = 0;
  let otherMessages = 0;
  for (const m of sent) {
    const p = partOf.get(`${m.chat_id}\u0000${m.text}`);
    if (!p) {
      otherMessages++;
      continue;
    }
    const id = `${m.chat_id}\u0000${p.occ}\u0000${p.part}`;
    if (seen.has(id)) {
      duplicateReplies++;
      continue;
    }
    seen.add(id);
    if (p.seq === null) continue;
    const max = maxByChat.get(m.chat_id);
    if (max && (p.seq < max[0] || (p.seq === max[0] && p.part < max[1]))) outOfOrder++;
    else maxByChat.set(m.chat_id, [p.seq, p.part]);
  }
  return { parts, duplicateReplies, outOfOrder, unsentParts: parts - seen.size, otherMessages };
}

/**
 * The family of a Redis key: its shape with every id segment as `*`, so keys
 * of one kind (every session's event stream, every BullMQ job hash) count as
 * one family. A segment is an id when it holds a digit or a `%` escape (key
 * parts escape `:` and `%`, scheduler/store/keys.ts); the hash-tag prefix is kept
 * as `{…}`. E.g. `{hermes}:session:chaos-7:events` → `{…}:session:*:events`,
 * `{hermes}:bull:ticks:repeat:loop%3Achaos-7:1764600000000` → `{…}:bull:ticks:repeat:*:*`.
 */
export function keyFamily(key: string): string {
  const m = /^\{[^}]*\}/.exec(key);
  const rest = m ? key.slice(m[0].length) : key;
  const shape = rest
    .split(':')
    .map((part) => (/[0-9%]/.test(part) ? '*' : part))
    .join(':');
  return `${m ? '{…}' : ''}${shape}`;
}

/** One reading of the chaos run's Redis: when, its memory, its keys, the ticks started so far. */
export interface MemorySample {
  at: number;
  usedMemoryBytes: number;
  keys: number;
  ticksStarted: number;
  /** Of `usedMemoryBytes`, what the sessions' transcripts and event streams hold. */
  historyBytes?: number;
}

/**
 * How Redis memory moves with the work done, over the second half of the
 * samples (the first half is the warm-up: BullMQ's retained-job caps and the
 * per-session structures fill then): bytes per 1,000 ticks started, as the
 * least-squares slope of used memory over ticks. Flat is near 0; a key per
 * tick (~200 B or more each) would show as ≥ 200,000 B per 1,000 ticks.
 * @returns the slope and the half's tick span; `null` slope with fewer than 3 samples
 */
export function memoryGrowthPerThousandTicks(samples: MemorySample[]): { bytesPerThousandTicks: number | null; ticks: number } {
  const half = samples.slice(Math.floor(samples.length / 2));
  if (half.length < 3) return { bytesPerThousandTicks: null, ticks: 0 };
  const n = half.length;
  const mx = half.reduce((s, x) => s + x.ticksStarted, 0) / n;
  const my = half.reduce((s, x) => s + x.usedMemoryBytes, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (const x of half) {
    sxy += (x.ticksStarted - mx) * (x.usedMemoryBytes - my);
    sxx += (x.ticksStarted - mx) ** 2;
  }
  const ticks = half[n - 1]!.ticksStarted - half[0]!.ticksStarted;
  return { bytesPerThousandTicks: sxx === 0 ? null : Math.round((sxy / sxx) * 1000), ticks };
}
