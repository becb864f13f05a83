/**
 * What a journal says about a turn being resumed: which model answers are done, and for each tool
 * call whether it finished (its result is used), is in doubt (it started, no result was recorded),
 * or never started. Pure: the worker reads the journal and acts on this
 * (docs/RELIABILITY.md, "A turn resumes from its journal").
 *
 * First entry wins: a second answer for the same round or a second result for the same call (a copy
 * of the turn that kept running past its lock) is ignored, so the resumed turn follows the first
 * account of each step.
 */
import { createHash } from 'node:crypto';
import type { AnswerEntry, JournalEntry, ResultEntry, SummaryEntry } from './journal-entry.ts';
import type { ON_DOUBT_POLICIES } from '../config/config.ts';

/** What a tool call of the turn is, by the journal. */
export type CallState = { state: 'done'; result: ResultEntry } | { state: 'in-doubt' } | { state: 'new' };

/** How an in-doubt call is handled: run again (idempotent, or the operator said so), or reported to the model as unknown. */
export type OnDoubt = (typeof ON_DOUBT_POLICIES)[number];

/** A journal read back: answers by round, started and finished calls by number. */
export interface TurnReplay {
  answers: ReadonlyMap<number, AnswerEntry>;
  started: ReadonlySet<number>;
  results: ReadonlyMap<number, ResultEntry>;
  /** Compaction summaries by the digest of what they stand for (`summaryDigest`). */
  summaries: ReadonlyMap<string, SummaryEntry>;
}

/** An empty replay: a turn with no journal yet. */
export const NO_REPLAY: TurnReplay = { answers: new Map(), started: new Set(), results: new Map(), summaries: new Map() };

/** The replay of `entries`, in the order they were written. */
export function replayOf(entries: readonly JournalEntry[]): TurnReplay {
  const answers = new Map<number, AnswerEntry>();
  const started = new Set<number>();
  const results = new Map<number, ResultEntry>();
  const summaries = new Map<string, SummaryEntry>();
  for (const e of entries) {
    if (e.type === 'answer') {
      if (!answers.has(e.round)) answers.set(e.round, e);
    } else if (e.type === 'started') started.add(e.call);
    else if (e.type === 'summary') {
      if (!summaries.has(e.of)) summaries.set(e.of, e);
    } else if (!results.has(e.call)) results.set(e.call, e);
  }
  return { answers, started, results, summaries };
}

/** The state of the `call`th tool call (1 = the turn's first). */
export function callState(replay: TurnReplay, call: number): CallState {
  const result = replay.results.get(call);
  if (result) return { state: 'done', result };
  return replay.started.has(call) ? { state: 'in-doubt' } : { state: 'new' };
}

/** Whether the replay holds anything: the turn started before (a retry, a takeover, a hand-back). */
export function isResumed(replay: TurnReplay): boolean {
  return replay.answers.size > 0 || replay.started.size > 0 || replay.summaries.size > 0;
}

/** Calls started but with no result: what a resumed turn finds in doubt. */
export function inDoubtCalls(replay: TurnReplay): number[] {
  return [...replay.started].filter((n) => !replay.results.has(n)).sort((a, b) => a - b);
}

/**
 * The idempotency key of the `call`th tool call of an occurrence's turn (`HERMES_STEP_ID`): the same
 * on every run of that call — a rerun after a crash included — and different for every other call.
 */
export function stepId(occurrenceId: string, call: number): string {
  return `${occurrenceId}:${call}`;
}

/** The digest a compaction summary is recorded under: sha256 of the messages it stands for, as JSON. */
export function summaryDigest(messages: readonly unknown[]): string {
  return createHash('sha256').update(JSON.stringify(messages)).digest('hex');
}
