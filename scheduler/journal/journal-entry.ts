/**
 * The steps of an agent turn as its journal records them (docs/RELIABILITY.md, "A turn resumes from
 * its journal"). A journal is a list, in the order the steps were written: each model answer (with
 * the tool calls it asked for), each tool call as it starts, each tool result; before them, a compaction
 * summary written for the turn. A step is written
 * before the next one starts, so a worker that takes the turn over knows what was done.
 */
import type { ModelSpend } from '../model-spend.ts';

/** A tool call a model answer asked for (`arguments` is the model's JSON text). */
export interface JournaledCall {
  id: string;
  name: string;
  arguments: string;
}

/** One model answer: the `round`th model call of the turn (0 = the first), what it answered and cost. */
export interface AnswerEntry {
  type: 'answer';
  round: number;
  content: string;
  /** The model's refusal text, when it gave one instead of content. */
  refusal?: string;
  /** Empty for the turn's final answer. */
  toolCalls: JournaledCall[];
  finishReason?: string;
  /** What the call cost (its retries, refusals for length and fallbacks included). */
  spend: ModelSpend;
}

/** A tool call about to run: the `call`th call of the turn (1 = the first), written before it starts. */
export interface StartedEntry {
  type: 'started';
  call: number;
  id: string;
  name: string;
  /** Epoch ms. */
  at: number;
}

/** What a tool call gave the model (its result, or the error it saw). */
export interface ResultEntry {
  type: 'result';
  call: number;
  id: string;
  name: string;
  /** The `tool` message content, as the model saw it. */
  content: string;
  /** The call failed (refused, timed out, failed, or its outcome was unknown): why, for the event stream. */
  error?: string;
  /** Epoch ms. */
  at: number;
}

/**
 * A compaction summary written before the turn (docs/CONTEXT.md, "Compaction"): `of` is the digest of
 * the messages it stands for (`summaryDigest`), so a resumed turn uses it only for the same messages.
 */
export interface SummaryEntry {
  type: 'summary';
  of: string;
  text: string;
  /** What the summary call cost. */
  spend: ModelSpend;
}

export type JournalEntry = AnswerEntry | StartedEntry | ResultEntry | SummaryEntry;

/** A stored entry, or `undefined` for text that is none (a journal is read, never trusted to be whole). */
export function decodeJournalEntry(raw: string): JournalEntry | undefined {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const e = v as Partial<JournalEntry>;
  if (e.type === 'answer' && Number.isInteger(e.round) && typeof e.content === 'string' && Array.isArray(e.toolCalls))
    return e as AnswerEntry;
  if (e.type === 'summary' && typeof e.of === 'string' && typeof e.text === 'string' && typeof e.spend === 'object')
    return e as SummaryEntry;
  if ((e.type === 'started' || e.type === 'result') && Number.isInteger(e.call) && typeof e.id === 'string' && typeof e.name === 'string') {
    if (e.type === 'result' && typeof e.content !== 'string') return undefined;
    return e as JournalEntry;
  }
  return undefined;
}
