/**
 * Token budgets (docs/CONTEXT.md, "Budgets"): the one rule loops, heartbeats, goals and cron jobs
 * pause by, and the texts that name the spend. Each record keeps its budget under its own field
 * names; it hands them over as a `TokenBudget`.
 *
 * - `--max-tokens N`: the schedule pauses after the turn whose spend brings the tokens counted since it
 *   was set or resumed to N or more. When one turn alone costs N or more, the reason says so.
 * - `agent.max_tokens_per_turn`: a turn whose calls pass it stops there; the answer of the call that
 *   passed it is kept and delivered (it was paid for), then the schedule pauses. A turn stopped
 *   before it had an answer (the call that passed it asked for tools) fails, and pauses it the same way.
 * - A budget set below what the schedule's last turn cost is set, with a warning that one turn
 *   costs about that much (`budgetSetWarning`).
 * - A cron job paused by a budget is not run by hand unless forced (`cron-commands.ts`, `runNow`).
 */
import { formatSpend, NO_TOTALS, type SpendTotals, type TurnBudgetOverrun } from '../model-spend.ts';

/** A schedule's `--max-tokens` state, as its record keeps it. */
export interface TokenBudget {
  /** `--max-tokens`; absent or `null`: no limit. */
  maxTokens?: number | null;
  /** Tokens counted against it since it was set or the schedule last resumed. */
  budgetTokens?: number;
  /** The schedule's totals (its last turn's cost among them). */
  spend?: SpendTotals;
}

/** What one turn of the schedule is called in a text: a loop's or heartbeat's `tick`, a goal's `turn`, a cron job's `run`. */
export type TurnNoun = 'tick' | 'turn' | 'run';

const n = (x: number) => x.toLocaleString('en-US');

/** How `isBudgetPause` knows the reasons `budgetPauseReason` writes. */
const BUDGET_REASON =
  /^(?:token budget of [\d,]+ reached \(--max-tokens\)|one (?:tick|turn|run) used [\d,]+ tokens, over agent\.max_tokens_per_turn)/;

/** The runner's words for a turn over `agent.max_tokens_per_turn`: `This turn used 873 tokens, over agent.max_tokens_per_turn (500).` */
export function turnOverrunText(o: TurnBudgetOverrun): string {
  return `This turn used ${n(o.usedTokens)} tokens, over agent.max_tokens_per_turn (${n(o.limitTokens)}).`;
}

/** Input plus output tokens of the schedule's last turn, when known. */
export function lastTurnTokens(spend: SpendTotals | undefined): number | undefined {
  return spend && spend.calls > 0 && spend.lastTurnTokens ? spend.lastTurnTokens : undefined;
}

/**
 * Why the schedule pauses after a turn, or `undefined` when it goes on (the rule at the top).
 * @param budget - the record after the turn (its spend added)
 * @param overrun - the turn passed `agent.max_tokens_per_turn`
 * @param noun - what a turn of this schedule is called
 */
export function budgetPauseReason(budget: TokenBudget, overrun: TurnBudgetOverrun | undefined, noun: TurnNoun): string | undefined {
  if (overrun) {
    return `one ${noun} used ${n(overrun.usedTokens)} tokens, over agent.max_tokens_per_turn (${n(overrun.limitTokens)})`;
  }
  const { maxTokens } = budget;
  const used = budget.budgetTokens ?? 0;
  if (!maxTokens || used < maxTokens) return undefined;
  const last = lastTurnTokens(budget.spend);
  const alone =
    last !== undefined && last >= maxTokens ? `; one ${noun} alone costs about ${n(last)} tokens, more than the whole budget` : '';
  return `token budget of ${n(maxTokens)} reached (--max-tokens): ${n(used)} tokens since it was set or resumed; in all ${formatSpend(budget.spend ?? NO_TOTALS)}${alone}`;
}

/** Whether a pause reason is one of `budgetPauseReason`'s. */
export function isBudgetPause(reason: string | null | undefined): boolean {
  return reason !== null && reason !== undefined && BUDGET_REASON.test(reason);
}

/**
 * The warning for a `--max-tokens` set at or below what the schedule's last turn cost (one turn would
 * use it up), as a sentence, or `undefined`. The budget is set all the same.
 */
export function budgetSetWarning(maxTokens: number | null | undefined, spend: SpendTotals | undefined, noun: TurnNoun): string | undefined {
  const last = lastTurnTokens(spend);
  if (!maxTokens || last === undefined || maxTokens > last) return undefined;
  return `--max-tokens ${n(maxTokens)} is less than one ${noun} costs: the last one used about ${n(last)} tokens, so the next ${noun} will pause it.`;
}
