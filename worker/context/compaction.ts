/**
 * Compaction: what a model call sends is fitted to a token budget
 * (docs/CONTEXT.md). It starts when the estimate is at or over the threshold
 * (`thresholdTokens`; default: over the budget), or when there are more messages
 * than `maxMessages`, and brings the messages down to the budget (`budgetTokens`,
 * the target) and that count; each step runs only while still over either:
 *
 *   1. Elide: tool results before the recent tail become a one-line stub (tool,
 *      size, first line, and the call's arguments, so the agent can run it
 *      again). No model call.
 *   2. Summarise: the middle — after the head (everything up to the first user
 *      message: the schedule's task or the session's first request) and before
 *      the recent tail — becomes one summary message written by one auxiliary
 *      model call. An earlier summary is part of the middle, so summaries fold.
 *      A summary that fails destroys nothing already summarised: earlier
 *      summaries (and markers) stay as they are, and only the messages new since
 *      then give way, to a marker that says what they were. The turn still runs
 *      (compaction never fails a turn).
 *   3. Cut older: the largest messages before the recent tail are cut to fit,
 *      keeping their head and tail with a marker between (the big-result rule,
 *      `../tools/tool-output.ts`).
 *   4. Drop older: if still over, the oldest messages after the head and before
 *      the recent tail go — never the latest user message (the turn's input) nor
 *      a summary or its marker (they stand for what went before).
 *   5. Cut recent: only then the recent messages are cut the same way, oldest
 *      first — so the newest tool result, which the model has not seen yet, is
 *      cut last and keeps its end (a log's verdict is its last line).
 *   6. Drop: if many small messages still do not fit, the oldest after the head go.
 *
 * The recent tail is the last `keepRecent` messages, at most `tailTokens` of
 * them (a message that does not fit goes to the middle, so one large recent
 * tool result is stubbed rather than summarised around); it never starts
 * between an assistant's tool calls and their results (a provider refuses a
 * tool result that answers no call).
 */
import { cutMiddle } from '../tools/tool-output.ts';
import { countMessageTokens, ESTIMATE_COUNTER, type TokenCounter } from './token-count.ts';
import { CHARS_PER_TOKEN, type EstimableMessage } from './token-estimate.ts';

/** A message compaction can work on (transcript or runner messages). */
export interface CompactableMessage extends EstimableMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  tool_call_id?: string;
}

/** First words of a summary message; a later compaction folds an earlier summary into the next. */
export const SUMMARY_PREFIX = '[Summary of earlier conversation';
/** First words of the marker left for messages whose summary failed. */
export const ELIDED_PREFIX = '[Earlier conversation elided';
/** Tool results at most this long are never stubbed (a stub would not be shorter). */
const STUB_MIN_CHARS = 240;
/** Longest `arguments` text a stub repeats; a longer one is cut, and the stub says so. */
const STUB_ARGUMENTS_MAX_CHARS = 1_000;
/** Longest quote of a message a marker gives. */
const MARKER_QUOTE_CHARS = 100;
/** A cut message keeps at least this many tokens. */
const MIN_CUT_TOKENS = 64;

/** What a compaction did, for the `context.compacted` event. */
export type CompactionReport = {
  beforeTokens: number;
  afterTokens: number;
  /** Tool results stubbed. */
  elided: number;
  /** Messages folded into a summary (or, when it failed, replaced by a marker). */
  summarised: number;
  /** Why the summary failed (earlier summaries kept, a marker for the rest). */
  summaryError?: string;
  /** Messages cut to fit. */
  cut: number;
  /** Messages dropped to fit. */
  dropped: number;
};

/** How to compact. */
export interface CompactionOptions<M extends CompactableMessage> {
  /** Tokens the messages are brought down to (the target). */
  budgetTokens: number;
  /** Compact only when the estimate is at or over this many tokens. @defaultValue `budgetTokens + 1` */
  thresholdTokens?: number;
  /** Messages at the end kept verbatim by steps 1 and 2 (at most, with `tailTokens`). */
  keepRecent: number;
  /** Most tokens the recent tail may hold (steps 1 and 2). @defaultValue no bound */
  tailTokens?: number;
  /** Most messages; more start a compaction that summarises (steps 2 and 4). @defaultValue no bound */
  maxMessages?: number;
  /** Tokens of messages as the model would count them (for an unknown model: calibrated). */
  estimate: (messages: readonly M[]) => number;
  /** Counts one message's text (to find the largest, to cut it). @defaultValue the estimate */
  counter?: TokenCounter;
  /** Writes the summary of the middle (step 2); without it step 2 is skipped. @throws when the summary failed */
  summarise?: (middle: readonly M[]) => Promise<string>;
  /** Builds a message of the caller's type from plain fields (the summary, the marker) and the messages it stands for. */
  make: (fields: { role: 'user'; content: string }, standsFor: readonly M[]) => M;
  /** Share of a cut message kept from its head, the rest from its tail (`tools.result_head_share`); absent: the head only. */
  cutHeadShare?: number;
}

/** One line of `text`, quoted and clipped to `max` characters. */
function quote(text: string, max = MARKER_QUOTE_CHARS): string {
  const line = text.trim().split('\n', 1)[0]!;
  return JSON.stringify(line.length > max ? `${line.slice(0, max - 1)}…` : line);
}

/** A call as the agent would make it again: `read_file {"path":"…"}`. */
function callText(call: { name: string; arguments: string }): string {
  const args = call.arguments.trim() || '{}';
  if (args.length <= STUB_ARGUMENTS_MAX_CHARS) return `${call.name} ${args}`;
  return `${call.name} ${args.slice(0, STUB_ARGUMENTS_MAX_CHARS)}… (arguments cut: ${args.length} characters)`;
}

/**
 * The stub that stands for an old tool result: its size and first line, and the call that produced
 * it (`call`, when known) so the agent can run it again.
 */
export function toolResultStub(m: CompactableMessage, call?: { name: string; arguments: string }): string {
  const firstLine = m.content.split('\n', 1)[0]!.slice(0, 120);
  const again = call ? `; to see it again, call ${callText(call)}` : '';
  return `[${m.name ?? call?.name ?? 'tool'} result elided to save context: ${m.content.length} characters; first line: ${JSON.stringify(firstLine)}${again}]`;
}

function isStub(m: CompactableMessage): boolean {
  return m.content.startsWith('[') && m.content.includes('elided to save context');
}

/** A summary or a marker an earlier compaction wrote. */
function isCompactionNote(m: CompactableMessage): boolean {
  return m.role === 'user' && (m.content.startsWith(SUMMARY_PREFIX) || m.content.startsWith(ELIDED_PREFIX));
}

/** Stub the tool results before index `cutoff` (step 1). */
function elideBefore<M extends CompactableMessage>(messages: readonly M[], cutoff: number): { messages: M[]; elided: number } {
  const calls = new Map<string, { name: string; arguments: string }>();
  for (const m of messages) for (const c of m.tool_calls ?? []) if (c.id) calls.set(c.id, c);
  let elided = 0;
  const out = messages.map((m, i) => {
    if (i >= cutoff || m.role !== 'tool' || m.content.length <= STUB_MIN_CHARS || isStub(m)) return m;
    const stub = toolResultStub(m, m.tool_call_id ? calls.get(m.tool_call_id) : undefined);
    if (stub.length >= m.content.length) return m;
    elided += 1;
    return { ...m, content: stub };
  });
  return { messages: out, elided };
}

/** Step 1: stub tool results older than the last `keepRecent` messages. */
export function elideOldToolResults<M extends CompactableMessage>(
  messages: readonly M[],
  keepRecent: number,
): { messages: M[]; elided: number } {
  return elideBefore(messages, messages.length - keepRecent);
}

/** Where the recent tail starts (see the header): at most `keepRecent` messages and `tailTokens` tokens, never on a tool result. */
function tailStartOf(
  messages: readonly CompactableMessage[],
  headEnd: number,
  keepRecent: number,
  bound?: { tailTokens: number; counter: TokenCounter },
): number {
  let start = Math.max(headEnd, messages.length - keepRecent);
  while (start > headEnd && messages[start]?.role === 'tool') start -= 1;
  if (!bound) return start;
  let tokens = 0;
  for (let i = start; i < messages.length; i++) tokens += countMessageTokens(bound.counter, messages[i]!);
  while (start < messages.length && (tokens > bound.tailTokens || messages[start]!.role === 'tool')) {
    tokens -= countMessageTokens(bound.counter, messages[start]!);
    start += 1;
  }
  return start;
}

/**
 * Step 2's split: the head (up to and including the first user message), the middle, and the
 * tail (see the header).
 * @param bound - the tail's most tokens, counted by `counter`; none: `keepRecent` alone
 * @returns null when there is no middle to summarise
 */
export function splitHeadMiddleTail<M extends CompactableMessage>(
  messages: readonly M[],
  keepRecent: number,
  bound?: { tailTokens: number; counter: TokenCounter },
) {
  const headEnd = messages.findIndex((m) => m.role === 'user') + 1; // 0 when there is no user message: no head
  const tailStart = tailStartOf(messages, headEnd, keepRecent, bound);
  if (tailStart - headEnd < 2) return null;
  return { head: messages.slice(0, headEnd), middle: messages.slice(headEnd, tailStart), tail: messages.slice(tailStart) };
}

/**
 * The marker for messages whose summary failed: what they were, so the agent knows what it no
 * longer has (the users' requests, the replies, the tool calls with the last one's arguments).
 */
export function elidedMarker(lost: readonly CompactableMessage[]): string {
  const users = lost.filter((m) => m.role === 'user');
  const replies = lost.filter((m) => m.role === 'assistant' && m.content.trim());
  const calls = lost.flatMap((m) => m.tool_calls ?? []);
  const parts: string[] = [];
  if (users.length > 0) {
    const ends = users.length === 1 ? quote(users[0]!.content) : `first ${quote(users[0]!.content)}, last ${quote(users.at(-1)!.content)}`;
    parts.push(`${users.length} user message${users.length === 1 ? '' : 's'} (${ends})`);
  }
  if (replies.length > 0)
    parts.push(`${replies.length} repl${replies.length === 1 ? 'y' : 'ies'} (last ${quote(replies.at(-1)!.content)})`);
  if (calls.length > 0) {
    const byName = new Map<string, number>();
    for (const c of calls) byName.set(c.name, (byName.get(c.name) ?? 0) + 1);
    const names = [...byName].map(([name, n]) => (n > 1 ? `${name} ×${n}` : name)).join(', ');
    const last = calls.at(-1)!;
    const lastArgs = last.arguments.length > MARKER_QUOTE_CHARS ? `${last.arguments.slice(0, MARKER_QUOTE_CHARS - 1)}…` : last.arguments;
    parts.push(
      `${calls.length} tool call${calls.length === 1 ? '' : 's'} and their results (${names}; the last: ${last.name} ${lastArgs})`,
    );
  }
  return `${ELIDED_PREFIX}: ${lost.length} messages were removed to fit the model's context window and their summary could not be written, so they are lost: ${parts.join('; ')}. Ask again or run a tool again for what is still needed.]`;
}

/**
 * Cut a text to about `tokens` tokens: its head and its tail, with a marker between saying what
 * was cut (the big-result rule, `../tools/tool-output.ts`).
 * @param charsPerToken - the text's own ratio when known (a tokenizer's count); default `CHARS_PER_TOKEN`
 * @param headShare - share of the room kept from the head, the rest from the tail; default the head only
 */
export function cutText(text: string, tokens: number, charsPerToken = CHARS_PER_TOKEN, headShare = 1): string {
  const keep = Math.max(0, Math.floor(tokens * charsPerToken) - 120);
  return cutMiddle(text, keep, headShare, "cut to fit the model's context window");
}

/**
 * Fit `messages` into `options.budgetTokens` once they reach `options.thresholdTokens` (the policy
 * in this file's header).
 * @returns the messages to send and what was done (`report` undefined when nothing was)
 */
export async function compactMessages<M extends CompactableMessage>(
  messages: readonly M[],
  options: CompactionOptions<M>,
): Promise<{ messages: M[]; report?: CompactionReport }> {
  const { budgetTokens, estimate } = options;
  const counter = options.counter ?? ESTIMATE_COUNTER;
  const beforeTokens = estimate(messages);
  const tooMany = (ms: readonly M[]) => options.maxMessages !== undefined && ms.length > options.maxMessages;
  if (beforeTokens < (options.thresholdTokens ?? budgetTokens + 1) && !tooMany(messages)) return { messages: [...messages] };
  const report: CompactionReport = { beforeTokens, afterTokens: beforeTokens, elided: 0, summarised: 0, cut: 0, dropped: 0 };
  const bound = options.tailTokens !== undefined ? { tailTokens: options.tailTokens, counter } : undefined;

  const headEnd = messages.findIndex((m) => m.role === 'user') + 1;
  const elided = elideBefore(messages, tailStartOf(messages, headEnd, options.keepRecent, bound));
  let out = elided.messages;
  report.elided = elided.elided;

  if ((estimate(out) > budgetTokens || tooMany(out)) && options.summarise) {
    const split = splitHeadMiddleTail(out, options.keepRecent, bound);
    if (split) {
      let middle: M[];
      try {
        const summary = (await options.summarise(split.middle)).trim();
        if (!summary) throw new Error('the summary was empty');
        const text = `${SUMMARY_PREFIX}: ${split.middle.length} messages, written to fit the model's context window]\n${summary}`;
        middle = [options.make({ role: 'user', content: text }, split.middle)];
        report.summarised = split.middle.length;
      } catch (err) {
        report.summaryError = (err as Error).message;
        const lost = split.middle.filter((m) => !isCompactionNote(m));
        middle = split.middle.filter(isCompactionNote);
        if (lost.length > 0) middle.push(options.make({ role: 'user', content: elidedMarker(lost) }, lost));
        report.summarised = lost.length;
      }
      out = [...split.head, ...middle, ...split.tail];
    }
  }

  // Steps 3 to 5: cut what is older than the recent tail, drop the oldest of it, and only then cut the recent messages.
  const recentStart = () => tailStartOf(out, headEnd, options.keepRecent, bound);
  // Messages cut as far as they go.
  const atMinimum = new Set<M>();
  const cutToFit = (candidates: () => number[]) => {
    while (estimate(out) > budgetTokens) {
      const excess = estimate(out) - budgetTokens;
      const i = candidates().find((c) => !atMinimum.has(out[c]!) && countMessageTokens(counter, out[c]!) > MIN_CUT_TOKENS);
      if (i === undefined) return;
      const m = out[i]!;
      const target = Math.max(MIN_CUT_TOKENS, countMessageTokens(counter, m) - excess - 32);
      const contentTokens = counter.text(m.content);
      const charsPerToken = contentTokens > 0 ? m.content.length / contentTokens : CHARS_PER_TOKEN;
      const cut = cutText(m.content, target, charsPerToken, options.cutHeadShare);
      if (cut.length >= m.content.length) {
        atMinimum.add(m);
        continue;
      }
      out = out.map((x, j) => (j === i ? { ...x, content: cut } : x));
      report.cut += 1;
    }
  };
  const bySizeDown = (indexes: number[]) =>
    indexes.sort((a, b) => countMessageTokens(counter, out[b]!) - countMessageTokens(counter, out[a]!));
  // Step 3: the older messages, biggest first.
  cutToFit(() => bySizeDown([...Array(recentStart()).keys()]));
  // Step 4: the oldest older messages (with the results of a dropped call), but the turn's input and the notes of compaction.
  const kept = (i: number) => i === out.findLastIndex((m) => m.role === 'user') || isCompactionNote(out[i]!);
  while (estimate(out) > budgetTokens) {
    let at = headEnd;
    while (at < out.length && kept(at)) at += 1;
    let n = 1;
    while (at + n < out.length && out[at + n]!.role === 'tool') n += 1;
    if (at + n > recentStart()) break;
    out = [...out.slice(0, at), ...out.slice(at + n)];
    report.dropped += n;
  }
  // Step 5: the recent messages, oldest first: the newest is cut last.
  cutToFit(() => [...Array(out.length - recentStart()).keys()].map((k) => recentStart() + k));

  // Step 6: drop the oldest messages after the head (with the tool results of a dropped call),
  // never the last message nor a call whose results run to the end (that would orphan them).
  while ((estimate(out) > budgetTokens || tooMany(out)) && out.length - headEnd > 1) {
    let n = 1;
    while (headEnd + n < out.length && out[headEnd + n]!.role === 'tool') n += 1;
    if (headEnd + n >= out.length) break;
    out = [...out.slice(0, headEnd), ...out.slice(headEnd + n)];
    report.dropped += n;
  }

  report.afterTokens = estimate(out);
  return { messages: out, report };
}
