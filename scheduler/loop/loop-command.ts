/**
 * The `/loop` grammar (docs/DESIGN.md §4), as a pure parser: text in, a command out, no I/O.
 *
 *   /loop [every] [<interval>] <prompt> [--times N] [--until <condition>] [--overlap queue|skip|cancel_other]
 *         [--notify auto|always|done|never] [--watch <check>] [--max-tokens N] [--model <name>]   (`../economy/economy-flags.ts`)
 *         [--deliver <targets>]   (where replies go besides the session: `../delivery/deliver-list.ts`)
 *   /loop status | pause | resume | stop | clear | cancel | help      (the whole argument)
 *
 * - `<interval>`: `30s`, `5m`, `2h`, `1h30m` (or, after `every`, a phrase like `10 minutes`).
 *   A bare number is part of the prompt. No interval → self-paced mode.
 * - Intervals under `loops.min_interval_seconds` are refused, naming the minimum
 *   (field report F22: one rule on every surface, like `hermes cron add`); a
 *   first token written like an interval with an unknown unit (`1x`) is an
 *   error naming the unit, not the start of a self-paced prompt; so is a
 *   signed one (`-5m`, `+1h`).
 * - `--times` takes a positive integer; `--until` takes the rest up to the next flag; `--overlap`
 *   what a tick due while the previous one runs does (`loop-overlap.ts`).
 * - The prompt may itself be a slash command (`/loop 10m /recap`).
 *
 * @throws ScheduleInputError for a missing prompt, a bad `--times`, an empty
 *   `--until`, an unknown flag, an over-long prompt, an interval below the
 *   minimum or above the maximum, or an interval with an unknown unit. Nothing is changed by a
 *   failed parse: callers parse before they write.
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { takeEconomyFlags } from '../economy/economy-flags.ts';
import { takeDeliverFlag } from '../delivery/deliver-list.ts';
import type { ScheduleEconomy } from '../economy/economy-flags.ts';
import {
  formatSeconds,
  INTERVAL_UNITS_HINT,
  isSignedInterval,
  looksLikeInterval,
  MAX_INTERVAL_SECONDS,
  MAX_TIMES,
  parseIntervalAt,
  signedIntervalMessage,
  unknownIntervalUnit,
} from '../interval.ts';
import { nameTable } from '../names/name-table.ts';
import { parseLoopOverlap, type LoopOverlap } from './loop-overlap.ts';

export type LoopControl = 'status' | 'pause' | 'resume' | 'stop' | 'help';

export type LoopCommand =
  | { action: LoopControl }
  | {
      action: 'set';
      prompt: string;
      /** Seconds between ticks; `null` = self-paced. */
      intervalSeconds: number | null;
      /** Finish after this many ticks; `null` = no limit besides the budget. */
      times: number | null;
      /** Condition judged after each tick; `null` = none. */
      until: string | null;
      /** Notes for the reply. */
      notes: string[];
      /** `--notify`, `--watch`, `--max-tokens`, `--model` (docs/CONTEXT.md). */
      economy: ScheduleEconomy;
      /** `--deliver`: targets in their text form (`../delivery/deliver-list.ts`); absent = the route it is set from. */
      deliver?: string[];
      /** `--overlap` (`loop-overlap.ts`); absent = `queue`. */
      overlap?: LoopOverlap;
    };

export interface LoopParseOptions {
  /** `loops.min_interval_seconds` */
  minIntervalSeconds: number;
  /** `agent.max_prompt_chars` */
  maxPromptChars: number;
}

const CONTROL = nameTable<LoopControl>({
  '': 'status',
  status: 'status',
  pause: 'pause',
  resume: 'resume',
  stop: 'stop',
  clear: 'stop',
  cancel: 'stop',
  help: 'help',
});

const FLAGS = new Set(['--times', '--until', '--overlap']);

/** Remove one pair of matching surrounding quotes. */
function unquote(s: string): string {
  const m = /^(["'])(.*)\1$/s.exec(s);
  return m ? m[2]! : s;
}

/** Parse the argument text of `/loop` (everything after the command word). */
export function parseLoopArgs(argText: string, options: LoopParseOptions): LoopCommand {
  const text = argText.trim();
  const control = CONTROL[text.toLowerCase()];
  if (control) return { action: control };

  const { deliver, rest: words } = takeDeliverFlag(text.split(/\s+/));
  const { economy, rest: tokens } = takeEconomyFlags(words);
  let times: number | null = null;
  let until: string | null = null;
  let overlap: LoopOverlap | undefined;
  const rest: string[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const tok = tokens[i]!;
    if (tok === '--times') {
      const value = tokens[++i];
      if (value === undefined || !/^\d+$/.test(value) || Number(value) < 1 || Number(value) > MAX_TIMES) {
        throw new ScheduleInputError(
          `--times needs a positive whole number up to ${MAX_TIMES}${value === undefined ? '' : `, got "${value}"`}.`,
          { field: 'times' },
        );
      }
      times = Number(value);
    } else if (tok === '--overlap') {
      const value = tokens[++i];
      if (value === undefined) throw new ScheduleInputError('--overlap needs a value: queue, skip or cancel_other.', { field: 'overlap' });
      overlap = parseLoopOverlap(value);
    } else if (tok === '--until') {
      const cond: string[] = [];
      while (i + 1 < tokens.length && !FLAGS.has(tokens[i + 1]!)) cond.push(tokens[++i]!);
      until = unquote(cond.join(' ').trim());
      if (until.length === 0)
        throw new ScheduleInputError('--until needs a condition, e.g. --until the build is green.', { field: 'until' });
    } else if (tok.startsWith('--') && tok.length > 2 && rest.length === 0) {
      throw new ScheduleInputError(
        `Unknown option ${tok} for /loop (known: --times, --until, --overlap, --notify, --watch, --max-tokens, --model, --deliver).`,
        {
          field: tok,
        },
      );
    } else {
      rest.push(tok);
    }
  }

  let index = 0;
  const notes: string[] = [];
  let intervalSeconds: number | null = null;
  const everyWord = rest[0]?.toLowerCase() === 'every';
  if (everyWord) index = 1;
  const interval = everyWord ? parseIntervalAt(rest, index) : parseIntervalAt(rest.slice(0, 1), 0);
  if (interval) {
    intervalSeconds = interval.seconds;
    index += interval.used;
  } else if (rest[index] !== undefined && isSignedInterval(rest[index]!)) {
    throw new ScheduleInputError(signedIntervalMessage(rest[index]!), { field: 'interval' });
  } else if (rest[index] !== undefined && looksLikeInterval(rest[index]!)) {
    throw new ScheduleInputError(`The interval "${rest[index]}" must be greater than zero.`, { field: 'interval' });
  } else if (rest[index] !== undefined && unknownIntervalUnit(rest[index]!) !== undefined) {
    throw new ScheduleInputError(
      `"${rest[index]}" is not an interval: unknown unit "${unknownIntervalUnit(rest[index]!)}"; use ${INTERVAL_UNITS_HINT}. Quote the prompt to start it with this word.`,
      { field: 'interval' },
    );
  } else if (everyWord) {
    throw new ScheduleInputError(`"every" must be followed by an interval like 30s, 5m, 2h or 1h30m.`, { field: 'interval' });
  }
  const prompt = unquote(rest.slice(index).join(' ').trim());
  if (prompt.length === 0) {
    throw new ScheduleInputError('/loop needs a prompt, e.g. /loop 10m check the CI build.', { field: 'prompt' });
  }
  if (prompt.length > options.maxPromptChars) {
    throw new ScheduleInputError(`The prompt is ${prompt.length} characters; the limit is ${options.maxPromptChars}.`, { field: 'prompt' });
  }
  if (intervalSeconds !== null) checkLoopInterval(intervalSeconds, options);
  if (overlap !== undefined && intervalSeconds === null) {
    throw new ScheduleInputError(
      "--overlap is for loops with an interval: a self-paced loop's next tick is set when its tick ends, so none overlaps.",
      { field: 'overlap' },
    );
  }
  return {
    action: 'set',
    prompt,
    intervalSeconds,
    times,
    until,
    notes,
    economy,
    ...(deliver ? { deliver } : {}),
    ...(overlap && overlap !== 'queue' ? { overlap } : {}),
  };
}

/**
 * The maximum (`MAX_INTERVAL_SECONDS`) and the configured minimum of a loop's or heartbeat's interval.
 * @param minimum - how the minimum is named in the message (`minimum`, `heartbeat minimum`) and its setting
 * @throws ScheduleInputError (field `interval`) naming the bound
 */
export function checkIntervalBounds(intervalSeconds: number, minIntervalSeconds: number, minimum: { name: string; setting: string }): void {
  if (intervalSeconds > MAX_INTERVAL_SECONDS) {
    throw new ScheduleInputError(
      `The interval ${formatSeconds(intervalSeconds)} is too long; the most is ${formatSeconds(MAX_INTERVAL_SECONDS)}.`,
      { field: 'interval' },
    );
  }
  if (intervalSeconds < minIntervalSeconds) {
    throw new ScheduleInputError(
      `The interval ${formatSeconds(intervalSeconds)} is below the ${minimum.name} of ${formatSeconds(minIntervalSeconds)} (${minimum.setting}).`,
      { field: 'interval' },
    );
  }
}

/** The maximum and `loops.min_interval_seconds` of a loop's interval. @throws ScheduleInputError naming the bound */
function checkLoopInterval(intervalSeconds: number, options: Pick<LoopParseOptions, 'minIntervalSeconds'>): void {
  checkIntervalBounds(intervalSeconds, options.minIntervalSeconds, { name: 'minimum', setting: 'loops.min_interval_seconds' });
}

/**
 * A loop's interval given on its own, as a field (`10m`, `1h30m`, `every 10 minutes`; the agent's
 * `schedules` tool): the units, maximum, minimum and their messages of `/loop`.
 * @returns seconds
 * @throws ScheduleInputError for text that is not one interval, or one out of bounds
 */
export function parseLoopInterval(text: string, options: Pick<LoopParseOptions, 'minIntervalSeconds'>): number {
  const seconds = parseIntervalField(text);
  checkLoopInterval(seconds, options);
  return seconds;
}

/**
 * One interval written on its own (`[every] <interval>`), the units of the chat grammar.
 * @throws ScheduleInputError naming what is wrong: a sign, zero, an unknown unit, extra words
 */
export function parseIntervalField(text: string, field = 'interval'): number {
  const tokens = text
    .trim()
    .split(/\s+/)
    .filter((t) => t.length > 0);
  const index = tokens[0]?.toLowerCase() === 'every' ? 1 : 0;
  const interval = parseIntervalAt(tokens, index);
  if (interval && index + interval.used === tokens.length) return interval.seconds;
  const first = interval ? undefined : tokens[index]; // an interval with words after it is no interval
  if (first !== undefined && isSignedInterval(first)) {
    throw new ScheduleInputError(`"${first}" is not an interval: an interval has no sign; use ${INTERVAL_UNITS_HINT}.`, { field });
  }
  if (first !== undefined && looksLikeInterval(first))
    throw new ScheduleInputError(`The interval "${first}" must be greater than zero.`, { field });
  const unit = first === undefined ? undefined : unknownIntervalUnit(first);
  if (unit !== undefined)
    throw new ScheduleInputError(`"${first}" is not an interval: unknown unit "${unit}"; use ${INTERVAL_UNITS_HINT}.`, { field });
  throw new ScheduleInputError(`"${text.trim()}" is not an interval; use ${INTERVAL_UNITS_HINT}.`, { field });
}

/** Help text of `/loop`. */
export const LOOP_HELP = [
  'Usage: /loop [every] [interval] <prompt> [--times N] [--until <condition>] [--overlap queue|skip|cancel_other]',
  '       [--notify auto|always|done|never] [--watch <check>] [--max-tokens N] [--model <name>]',
  '       [--deliver origin,telegram:<chat>,slack:<channel>,discord:<channel>,https://…]',
  '  /loop 10m check the CI build and tell me when it is green',
  '  /loop 5m /recap            (the prompt may be a slash command)',
  '  /loop <prompt>             (no interval: self-paced)',
  'Control: /loop status | pause | resume | stop | help',
  'The agent ends the loop by printing LOOP_COMPLETE on its own line.',
].join('\n');
