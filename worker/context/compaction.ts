/**
 * Compaction: what a model call sends is fitted to a token budget
 * (docs/CONTEXT.md). The policy, in order, each step only while still over:
 *
 *   1. Elide: tool results older than the most recent `keepRecent` messages
 *      become a one-line stub (tool, size, first line, "elided"). No model call.
 *   2. Summarise: the middle — after the head (everything up to the first user
 *      message: the schedule's task or the session's first request) and before
 *      the recent tail — becomes one summary message written by one auxiliary
 *      model call. A summary that fails leaves a marker in its place; the
 *      turn still runs (compaction never fails a turn).
 *   3. Cut: the largest messages are cut to fit, with a marker; a single input
 *      or tool result larger than the budget is cut this way.
 *   4. Drop: if many small messages still do not fit, the oldest after the head go.
 *
 * The tail is never split between an assistant's tool calls and their
 * results (a provider refuses a tool result that answers no call).
 */
import { CHARS_PER_TOKEN, estimateMessageTokens, type EstimableMessage } from './token-estimate.ts';

/** A message compaction can work on (transcript or runner messages). */
export interface CompactableMessage extends EstimableMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  tool_call_id?: string;
}

/** First words of a summary message; a later compaction folds an earlier summary into the next. */
export const SUMMARY_PREFIX = '[Summary of earlier conversation';
/** First words of the marker left when the summary failed. */
export const ELIDED_PREFIX = '[Earlier conversation elided';
/** Tool results at most this long are never stubbed (a stub would not be shorter). */
const STUB_MIN_CHARS = 240;
/** A cut message keeps at least this many tokens. */
const MIN_CUT_TOKENS = 64;

/** What a compaction did, for the `context.compacted` event. */
export type CompactionReport = {
  beforeTokens: number;
  afterTokens: number;
  /** Tool results stubbed. */
  elided: number;
  /** Messages folded into a summary (or a marker). */
  summarised: number;
  /** Why the summary failed (a marker stands in its place). */
  summaryError?: string;
  /** Messages cut to fit. */
  cut: number;
  /** Messages dropped to fit. */
  dropped: number;
};

/** How to compact. */
export interface CompactionOptions<M extends CompactableMessage> {
  /** Tokens the messages may take. */
  budgetTokens: number;
  /** Messages at the end kept verbatim by steps 1 and 2. */
  keepRecent: number;
  /** Tokens of messages as the model would count them (calibrated). */
  estimate: (messages: readonly M[]) => number;
  /** Writes the summary of the middle (step 2); without it step 2 is skipped. @throws when the summary failed */
  summarise?: (middle: readonly M[]) => Promise<string>;
  /** Builds a message of the caller's type from plain fields (the summary, the marker) and the messages it stands for. */
  make: (fields: { role: 'user'; content: string }, standsFor: readonly M[]) => M;
}

/** The stub that stands for an old tool result. */
export function toolResultStub(m: CompactableMessage): string {
  const firstLine = m.content.split('\n', 1)[0]!.slice(0, 120);
  return `[${m.name ?? 'tool'} result elided to save context: ${m.content.length} characters; first line: ${JSON.stringify(firstLine)}]`;
}

/** Step 1: stub tool results older than the last `keepRecent` messages. */
export function elideOldToolResults<M extends CompactableMessage>(
  messages: readonly M[],
  keepRecent: number,
): { messages: M[]; elided: number } {
  const cutoff = messages.length - keepRecent;
  let elided = 0;
  const out = messages.map((m, i) => {
    if (
      i >= cutoff ||
      m.role !== 'tool' ||
      m.content.length <= STUB_MIN_CHARS ||
      (m.content.startsWith('[') && m.content.includes('elided to save context'))
    )
      return m;
    elided += 1;
    return { ...m, content: toolResultStub(m) };
  });
  return { messages: out, elided };
}

/**
 * Step 2's split: the head (up to and including the first user message), the middle, and the
 * tail (the last `keepRecent` messages, moved back so it starts on no tool result).
 * @returns null when there is no middle to summarise
 */
export function splitHeadMiddleTail<M extends CompactableMessage>(messages: readonly M[], keepRecent: number) {
  const firstUser = messages.findIndex((m) => m.role === 'user');
  const headEnd = firstUser + 1; // 0 when there is no user message: no head
  let tailStart = Math.max(headEnd, messages.length - keepRecent);
  while (tailStart > headEnd && messages[tailStart]?.role === 'tool') tailStart -= 1;
  if (tailStart - headEnd < 2) return null;
  return { head: messages.slice(0, headEnd), middle: messages.slice(headEnd, tailStart), tail: messages.slice(tailStart) };
}

/** Cut a text to about `tokens` tokens, with a marker saying what was cut. */
export function cutText(text: string, tokens: number): string {
  const keep = Math.max(0, tokens * CHARS_PER_TOKEN - 80);
  if (text.length <= keep) return text;
  return `${text.slice(0, keep)}\n[cut to fit the model's context window: ${keep} of ${text.length} characters kept]`;
}

/**
 * Fit `messages` into `options.budgetTokens` (the policy in this file's header).
 * @returns the messages to send and what was done (`report` undefined when they fit already)
 */
export async function compactMessages<M extends CompactableMessage>(
  messages: readonly M[],
  options: CompactionOptions<M>,
): Promise<{ messages: M[]; report?: CompactionReport }> {
  const { budgetTokens, estimate } = options;
  const beforeTokens = estimate(messages);
  if (beforeTokens <= budgetTokens) return { messages: [...messages] };
  const report: CompactionReport = { beforeTokens, afterTokens: beforeTokens, elided: 0, summarised: 0, cut: 0, dropped: 0 };

  const elided = elideOldToolResults(messages, options.keepRecent);
  let out = elided.messages;
  report.elided = elided.elided;

  if (estimate(out) > budgetTokens && options.summarise) {
    const split = splitHeadMiddleTail(out, options.keepRecent);
    if (split) {
      let text: string;
      try {
        const summary = (await options.summarise(split.middle)).trim();
        if (!summary) throw new Error('the summary was empty');
        text = `${SUMMARY_PREFIX}: ${split.middle.length} messages, written to fit the model's context window]\n${summary}`;
      } catch (err) {
        report.summaryError = (err as Error).message;
        text = `${ELIDED_PREFIX}: ${split.middle.length} messages were removed to fit the model's context window; their summary failed. The event stream still has them.]`;
      }
      report.summarised = split.middle.length;
      out = [...split.head, options.make({ role: 'user', content: text }, split.middle), ...split.tail];
    }
  }

  // Step 3: cut the largest messages, biggest first, each by the excess (never below MIN_CUT_TOKENS).
  for (let guard = 0; guard < out.length && estimate(out) > budgetTokens; guard++) {
    const excess = estimate(out) - budgetTokens;
    let biggest = -1;
    let biggestTokens = MIN_CUT_TOKENS;
    out.forEach((m, i) => {
      const t = estimateMessageTokens(m);
      if (t > biggestTokens) {
        biggest = i;
        biggestTokens = t;
      }
    });
    if (biggest < 0) break;
    const target = Math.max(MIN_CUT_TOKENS, biggestTokens - excess - 32);
    const m = out[biggest]!;
    const cut = cutText(m.content, target);
    if (cut === m.content) break;
    out = out.map((x, i) => (i === biggest ? { ...x, content: cut } : x));
    report.cut += 1;
  }

  // Step 4: drop the oldest messages after the head (with the tool results of a dropped call),
  // never the last message nor a call whose results run to the end (that would orphan them).
  const headEnd = out.findIndex((m) => m.role === 'user') + 1;
  while (estimate(out) > budgetTokens && out.length - headEnd > 1) {
    let n = 1;
    while (headEnd + n < out.length && out[headEnd + n]!.role === 'tool') n += 1;
    if (headEnd + n >= out.length) break;
    out = [...out.slice(0, headEnd), ...out.slice(headEnd + n)];
    report.dropped += n;
  }

  report.afterTokens = estimate(out);
  return { messages: out, report };
}
