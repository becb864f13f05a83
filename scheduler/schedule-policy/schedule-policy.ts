/**
 * The schedule policy: the rules loops, heartbeats and cron jobs share, written once (docs/DESIGN.md,
 * "One schedule policy"). Each record hands its share of state over as a `ScheduleLedger` and takes
 * the result back; nothing here knows a record's other fields.
 *
 * - Spend: a turn's model calls join the schedule's totals; under `--max-tokens` they count against
 *   the budget too (`budgetTokens`), also for a failed turn (its calls were paid for).
 * - Watch (`--watch`): the digest of the check's output is kept after a successful turn only, and
 *   only while the schedule still has the watch that produced it, so a failed turn runs again at the
 *   next occurrence even when the output stays as it was. An unchanged check counts in
 *   `unchangedTurns`; a quiet reply (`[SILENT]`) of a turn that ran counts in `silentTurns`.
 * - Token budget (`../economy/token-budget.ts`): after the turn whose spend reaches `--max-tokens`,
 *   or that passed `agent.max_tokens_per_turn`, the schedule pauses, the reason naming the spend.
 * - Failure streak (`FailureRule`): each failed turn adds one, a successful one resets it (a skipped
 *   occurrence leaves it). After `maxConsecutive` failures in a row (0 = never) that span at least
 *   `pauseAfterSeconds` the schedule pauses, naming the last error. While failing, the next try
 *   waits `backoffSeconds · 2^(k−1)` after the k-th failure, at most `backoffMaxSeconds`.
 * - Resume gives fresh tries (the streak starts again) and a fresh `--max-tokens` allowance.
 *
 * The budget pause is checked before the failure streak: a turn that both spent the budget and
 * failed says it was the budget (resuming without raising it would pause again at once).
 */
import { addToTotals, totalTokens, type ModelSpend, type SpendTotals, type TurnBudgetOverrun } from '../model-spend.ts';
import { budgetPauseReason, type TurnNoun } from '../economy/token-budget.ts';
import { isSilentReply } from '../economy/silent-reply.ts';
import { formatSeconds } from '../interval.ts';
import { clip } from '../text/clip.ts';

/** A schedule's state under the shared rules, in one spelling whatever the record calls it. */
export interface ScheduleLedger {
  /** Failed turns in a row. */
  failureStreak: number;
  /** When the first failed turn of the current streak started (epoch ms); `null` while none failed. */
  failingSince: number | null;
  /** Error of the last failed turn; `null` after a successful one. */
  lastError: string | null;
  /** `--max-tokens`; `null`: no limit. */
  maxTokens: number | null;
  /** Tokens counted against `maxTokens` since it was set or the schedule last resumed. */
  budgetTokens: number;
  /** Model calls and tokens over the schedule's life. */
  spend: SpendTotals | undefined;
  /** `--watch`; `null`: none. */
  watch: string | null;
  /** Digest of the watch's output at the last successful turn that ran it. */
  watchDigest: string | null;
  /** Turns that ended without a model call because the watch's output had not changed. */
  unchangedTurns: number;
  /** Turns whose reply was quiet (`[SILENT]`). */
  silentTurns: number;
}

/** How one turn of a schedule ended, as the shared rules read it. */
export interface TurnEnd {
  /** `ok`: it ran; `error`: it failed (`error` says why); `skipped`: the occurrence did not run. */
  status: 'ok' | 'error' | 'skipped';
  error?: string | null;
  startedAt: number;
  finishedAt: number;
  /** The reply (empty for a failed, skipped or unchanged turn). */
  reply: string;
  /** What its model calls cost. */
  spend?: ModelSpend;
  /** The watch's output had not changed: the turn ended without a model call. */
  unchanged?: boolean;
  /** The watch the turn checked and its output's digest (`null` for a check that failed). */
  watch?: { spec: string; digest: string | null };
  /** The turn passed `agent.max_tokens_per_turn`: the schedule pauses at once. */
  overTurnBudget?: TurnBudgetOverrun;
}

/**
 * How a failing schedule waits and when it gives up, read from its kind's config section
 * (`failureRule`). `backoffSeconds` 0: no back-off (the schedule's own cadence is the next try).
 */
export interface FailureRule {
  /** Failed turns in a row before the schedule pauses; 0 = never. */
  maxConsecutive: number;
  /** First wait after a failure, seconds; 0 = none. */
  backoffSeconds: number;
  /** Longest wait between tries, seconds. */
  backoffMaxSeconds: number;
  /** The failures must span at least this long before they pause it; 0 = the count alone. */
  pauseAfterSeconds: number;
}

/**
 * A config section's failure settings as the one rule: `max_consecutive_failures`, and where the
 * section has them `failure_backoff_seconds`, `failure_backoff_max_seconds` and
 * `failure_pause_after_seconds` (`loops.*`). A section without them (`cron.*`: a job's calendar is
 * its cadence) has no back-off and pauses on the count alone.
 */
export function failureRule(section: {
  max_consecutive_failures: number;
  failure_backoff_seconds?: number;
  failure_backoff_max_seconds?: number;
  failure_pause_after_seconds?: number;
}): FailureRule {
  const backoff = section.failure_backoff_seconds ?? 0;
  return {
    maxConsecutive: section.max_consecutive_failures,
    backoffSeconds: backoff,
    backoffMaxSeconds: section.failure_backoff_max_seconds ?? backoff,
    pauseAfterSeconds: section.failure_pause_after_seconds ?? 0,
  };
}

/** Why the shared rules pause a schedule after a turn. */
export interface PolicyPause {
  cause: 'budget' | 'failures';
  reason: string;
}

/** The ledger after a turn (pure): streak, spend, budget, watch digest and counts (the rules at the top). */
function afterTurn(ledger: ScheduleLedger, turn: TurnEnd): ScheduleLedger {
  const spend = turn.spend;
  const failed = turn.status === 'error';
  const next: ScheduleLedger = { ...ledger };
  if (turn.status === 'ok') {
    next.failureStreak = 0;
    next.failingSince = null;
    next.lastError = null;
  } else if (failed) {
    next.failureStreak = ledger.failureStreak + 1;
    next.failingSince = ledger.failingSince ?? turn.startedAt;
    next.lastError = turn.error ?? 'unknown error';
  }
  if (spend && spend.calls > 0) next.spend = addToTotals(ledger.spend, spend);
  if (ledger.maxTokens) next.budgetTokens = ledger.budgetTokens + (spend ? totalTokens(spend) : 0);
  if (turn.unchanged) next.unchangedTurns = ledger.unchangedTurns + 1;
  else if (turn.status === 'ok' && isSilentReply(turn.reply)) next.silentTurns = ledger.silentTurns + 1;
  if (turn.watch && turn.status === 'ok' && ledger.watch === turn.watch.spec) next.watchDigest = turn.watch.digest;
  return next;
}

/**
 * Why the schedule pauses after `turn`, or `undefined` when the shared rules let it go on (pure).
 * @param ledger - the ledger after the turn (`afterTurn`)
 * @param noun - what a turn of this schedule is called in the reason
 */
function pauseAfter(ledger: ScheduleLedger, turn: TurnEnd, rule: FailureRule, noun: TurnNoun): PolicyPause | undefined {
  const budget = budgetPauseReason(ledger, turn.overTurnBudget, noun);
  if (budget) return { cause: 'budget', reason: budget };
  if (turn.status !== 'error' || rule.maxConsecutive <= 0 || ledger.failureStreak < rule.maxConsecutive) return undefined;
  const spanMs = turn.finishedAt - (ledger.failingSince ?? turn.startedAt);
  if (spanMs < rule.pauseAfterSeconds * 1000) return undefined;
  const over = rule.pauseAfterSeconds > 0 ? ` over ${formatSeconds(Math.round(spanMs / 1000))}` : '';
  return {
    cause: 'failures',
    reason: `${ledger.failureStreak} failed ${noun}s in a row${over}; last error: ${clipError(ledger.lastError ?? 'unknown error')}`,
  };
}

/** Seconds before the next try after the `streak`-th failed turn in a row; 0 when the rule has no back-off. */
function backoffSeconds(streak: number, rule: FailureRule): number {
  // Stryker disable next-line ConditionalExpression,EqualityOperator: with backoffSeconds 0 the formula below is 0 as well.
  if (rule.backoffSeconds <= 0) return 0;
  return Math.min(rule.backoffMaxSeconds, rule.backoffSeconds * 2 ** Math.max(0, Math.min(streak - 1, 30)));
}

/** When a failing schedule tries next (epoch ms), or `null` when it is not failing or the rule has no back-off. */
function retryAt(ledger: ScheduleLedger, finishedAt: number, rule: FailureRule): number | null {
  if (ledger.failureStreak === 0) return null;
  const wait = backoffSeconds(ledger.failureStreak, rule);
  return wait > 0 ? finishedAt + wait * 1000 : null;
}

/** The ledger after a resume: fresh tries, and a fresh `--max-tokens` allowance. */
function resume(ledger: ScheduleLedger): ScheduleLedger {
  return { ...ledger, failureStreak: 0, failingSince: null, ...(ledger.maxTokens ? { budgetTokens: 0 } : {}) };
}

/** Whether a pause reason is the failure streak's (`pauseAfter`, cause `failures`). */
function pausedByFailures(reason: string | null | undefined, streak: number): boolean {
  return Boolean(reason && streak > 0 && new RegExp(`^${streak} failed (?:tick|turn|run)s in a row`).test(reason));
}

/** What a failing schedule's notice says of the rule: when it would pause, and the streak so far. */
function failureRuleText(rule: FailureRule, streak: number): string {
  if (rule.maxConsecutive <= 0) return '';
  const over = rule.pauseAfterSeconds > 0 ? ` over at least ${formatSeconds(rule.pauseAfterSeconds)}` : '';
  return `It pauses after ${rule.maxConsecutive} failures in a row${over} (${streak} so far).`;
}

/** An error message for a one-line notice or reason, at most 300 characters. */
export function clipError(message: string): string {
  return clip(message, 300);
}

/**
 * The rules every schedule kind applies, as one object: a loop's `applyTick` and a cron job's
 * `applyRun` both go through it, so no rule is written twice.
 */
export const SCHEDULE_POLICY = Object.freeze({
  afterTurn,
  pauseAfter,
  backoffSeconds,
  retryAt,
  resume,
  pausedByFailures,
  failureRuleText,
});
