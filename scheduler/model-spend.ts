/**
 * What model calls cost, in tokens: one turn's spend (`ModelSpend`, summed
 * over its model calls — the turn's own, its judges', its compaction's) and a
 * schedule's running totals (`SpendTotals`, kept on loop, heartbeat, goal and
 * cron job records). Tokens are the provider's reported usage; a call whose
 * endpoint reported none is estimated and the sum says so (`estimated`).
 */

import { wireKeys, type WireKeys } from './text/wire-case.ts';

/** The spend of one turn (or one model call). */
export interface ModelSpend {
  /** Model calls made (a retried call counts once). */
  calls: number;
  /** Prompt tokens, summed over the calls. */
  inputTokens: number;
  /** Completion tokens, summed over the calls. */
  outputTokens: number;
  /** Prompt tokens the provider served from its cache (part of `inputTokens`), when it says. */
  cachedTokens: number;
  /** Prompt tokens of the turn's last call: how large its context has grown. */
  lastInputTokens: number;
  /** True when some call's usage was estimated (the endpoint reported none). */
  estimated: boolean;
}

/** Running totals of a schedule over its life (and since its last resume, for `--max-tokens`). */
export interface SpendTotals {
  calls: number;
  inputTokens: number;
  outputTokens: number;
  /**
   * Input tokens the provider served from its prompt cache (part of `inputTokens`); absent on
   * totals kept before it was counted (read as 0).
   */
  cachedTokens?: number;
  /** Input tokens of the last turn's last call. */
  lastInputTokens: number;
  /**
   * Input plus output tokens of the last turn, all its calls (compaction, turn, judge): what one more
   * turn costs, about (`--max-tokens` warns when set below it). Absent in totals kept before it existed.
   */
  lastTurnTokens?: number;
  /** Some of the totals were estimated. */
  estimated: boolean;
}

/** A turn whose model calls passed `agent.max_tokens_per_turn` (what it used, the limit; tokens in plus out). */
export interface TurnBudgetOverrun {
  usedTokens: number;
  limitTokens: number;
}

export const NO_SPEND: ModelSpend = Object.freeze({
  calls: 0,
  inputTokens: 0,
  outputTokens: 0,
  cachedTokens: 0,
  lastInputTokens: 0,
  estimated: false,
});
export const NO_TOTALS: SpendTotals = Object.freeze({
  calls: 0,
  inputTokens: 0,
  outputTokens: 0,
  cachedTokens: 0,
  lastInputTokens: 0,
  lastTurnTokens: 0,
  estimated: false,
});

/**
 * Spend on every wire (`/api`, the CLI's `--json`, MCP; scheduler/text/wire-case.ts): the totals in
 * snake_case, each field present (`input_tokens`, `cached_tokens`, `last_turn_tokens`, …).
 */
export type SpendWire = WireKeys<Required<SpendTotals>>;

/** Spend totals on the wire (`SpendWire`): zeros before the first model call, and for a count kept since. */
export function spendWire(t: SpendTotals | undefined): SpendWire {
  return wireKeys({ ...NO_TOTALS, ...t } as Required<SpendTotals>);
}

/** The spend of one run or turn on the wire: `ModelSpend` in snake_case, zeros when it made no model call. */
export function turnSpendWire(s: ModelSpend | undefined): WireKeys<ModelSpend> {
  return wireKeys({ ...NO_SPEND, ...s });
}

/** Totals read back from their wire form (`SpendWire`), for a view's own reader (the console's cron pages). */
export function spendFromWire(w: SpendWire): SpendTotals {
  return {
    calls: w.calls,
    inputTokens: w.input_tokens,
    outputTokens: w.output_tokens,
    cachedTokens: w.cached_tokens,
    lastInputTokens: w.last_input_tokens,
    lastTurnTokens: w.last_turn_tokens,
    estimated: w.estimated,
  };
}

/** `a` and `b` together (`lastInputTokens` is `b`'s when `b` made a call). */
export function sumSpend(a: ModelSpend, b: ModelSpend): ModelSpend {
  return {
    calls: a.calls + b.calls,
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cachedTokens: a.cachedTokens + b.cachedTokens,
    lastInputTokens: b.calls > 0 ? b.lastInputTokens : a.lastInputTokens,
    estimated: a.estimated || b.estimated,
  };
}

/** Totals after one more turn. */
export function addToTotals(totals: SpendTotals | undefined, spend: ModelSpend | undefined): SpendTotals {
  const t = totals ?? NO_TOTALS;
  if (!spend || spend.calls === 0) return { ...t };
  return {
    calls: t.calls + spend.calls,
    inputTokens: t.inputTokens + spend.inputTokens,
    outputTokens: t.outputTokens + spend.outputTokens,
    cachedTokens: (t.cachedTokens ?? 0) + spend.cachedTokens,
    lastInputTokens: spend.lastInputTokens,
    lastTurnTokens: totalTokens(spend),
    estimated: t.estimated || spend.estimated,
  };
}

/** Input plus output tokens. */
export function totalTokens(t: { inputTokens: number; outputTokens: number }): number {
  return t.inputTokens + t.outputTokens;
}

/** `' (30,720 cached)'` after input tokens, or '' when the provider served none from its cache. */
export function cachedNote(t: { cachedTokens?: number }): string {
  return t.cachedTokens ? ` (${t.cachedTokens.toLocaleString('en-US')} cached)` : '';
}

/**
 * `12 model calls, 34,512 tokens in (30,720 cached), 1,204 out (last input 2,301)`, `~` before
 * estimated figures.
 */
export function formatSpend(t: SpendTotals): string {
  const n = (x: number) => x.toLocaleString('en-US');
  const approx = t.estimated ? '~' : '';
  return (
    `${n(t.calls)} model call${t.calls === 1 ? '' : 's'}, ${approx}${n(t.inputTokens)} tokens in${cachedNote(t)}, ${approx}${n(t.outputTokens)} out` +
    (t.calls > 0 ? ` (last input ${approx}${n(t.lastInputTokens)})` : '')
  );
}
