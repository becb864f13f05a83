/**
 * The `/heartbeat` grammar (docs/DESIGN.md §5), alias `/hb`, as a pure parser:
 *
 *   /heartbeat every <interval> <prompt> [--notify …] [--watch …] [--max-tokens N] [--model …] [--deliver <targets>]
 *   /heartbeat status | pause | resume | clear           (the whole argument)
 *
 * Intervals allow decimals and long unit names (`every 1.5 hours`, `every 90 seconds`,
 * `every 2h`). Intervals under `heartbeat.min_interval_seconds` (60) are refused,
 * naming the minimum (field report F22); an interval with an unknown unit is an
 * error naming the unit.
 *
 * @throws ScheduleInputError for a missing `every`, a bad interval, an interval
 *   below the minimum or above the maximum, or a missing prompt
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { takeEconomyFlags } from '../economy/economy-flags.ts';
import { takeDeliverFlag } from '../delivery/deliver-list.ts';
import { checkIntervalBounds, parseIntervalField } from './loop-command.ts';
import type { ScheduleEconomy } from '../economy/economy-flags.ts';
import { INTERVAL_UNITS_HINT, isSignedInterval, parseIntervalAt, signedIntervalMessage, unknownIntervalUnit } from '../interval.ts';
import { nameTable } from '../names/name-table.ts';

export type HeartbeatCommand =
  | { action: 'status' | 'pause' | 'resume' | 'stop' | 'help' }
  | {
      action: 'set';
      prompt: string;
      intervalSeconds: number;
      notes: string[];
      economy: ScheduleEconomy;
      /** `--deliver`, as for `/loop`. */
      deliver?: string[];
    };

const CONTROL = nameTable<'status' | 'pause' | 'resume' | 'stop' | 'help'>({
  '': 'status',
  status: 'status',
  pause: 'pause',
  resume: 'resume',
  clear: 'stop',
  stop: 'stop',
  help: 'help',
});

/** Parse the argument text of `/heartbeat` (see the grammar above). @throws ScheduleInputError */
export function parseHeartbeatArgs(argText: string, options: { minIntervalSeconds: number; maxPromptChars: number }): HeartbeatCommand {
  const text = argText.trim();
  const control = CONTROL[text.toLowerCase()];
  if (control) return { action: control };
  const { deliver, rest: words } = takeDeliverFlag(text.split(/\s+/));
  const { economy, rest: tokens } = takeEconomyFlags(words);
  let index = tokens[0]?.toLowerCase() === 'every' ? 1 : 0;
  const interval = parseIntervalAt(tokens, index);
  if (!interval) {
    if (tokens[index] !== undefined && isSignedInterval(tokens[index]!)) {
      throw new ScheduleInputError(signedIntervalMessage(tokens[index]!), { field: 'interval' });
    }
    const unit = tokens[index] === undefined ? undefined : unknownIntervalUnit(tokens[index]!);
    if (unit !== undefined) {
      throw new ScheduleInputError(`"${tokens[index]}" is not an interval: unknown unit "${unit}"; use ${INTERVAL_UNITS_HINT}.`, {
        field: 'interval',
      });
    }
    throw new ScheduleInputError('Usage: /heartbeat every <interval> <prompt>, e.g. /heartbeat every 30m report on the deploy.', {
      field: 'interval',
    });
  }
  index += interval.used;
  const prompt = tokens.slice(index).join(' ').trim();
  if (prompt.length === 0) throw new ScheduleInputError('/heartbeat needs a prompt after the interval.', { field: 'prompt' });
  if (prompt.length > options.maxPromptChars) {
    throw new ScheduleInputError(`The prompt is ${prompt.length} characters; the limit is ${options.maxPromptChars}.`, { field: 'prompt' });
  }
  const notes: string[] = [];
  const intervalSeconds = interval.seconds;
  checkHeartbeatInterval(intervalSeconds, options);
  return { action: 'set', prompt, intervalSeconds, notes, economy, ...(deliver ? { deliver } : {}) };
}

/** The maximum and `heartbeat.min_interval_seconds` of a heartbeat's interval. @throws ScheduleInputError naming the bound */
function checkHeartbeatInterval(intervalSeconds: number, options: { minIntervalSeconds: number }): void {
  checkIntervalBounds(intervalSeconds, options.minIntervalSeconds, {
    name: 'heartbeat minimum',
    setting: 'heartbeat.min_interval_seconds',
  });
}

/**
 * A heartbeat's interval given on its own, as a field (the agent's `schedules` tool): the units,
 * maximum, minimum and their messages of `/heartbeat`.
 * @returns seconds
 * @throws ScheduleInputError
 */
export function parseHeartbeatInterval(text: string, options: { minIntervalSeconds: number }): number {
  const seconds = parseIntervalField(text);
  checkHeartbeatInterval(seconds, options);
  return seconds;
}

export const HEARTBEAT_HELP = [
  'Usage: /heartbeat every <interval> <prompt>   (alias /hb; minimum 60s)',
  '       [--notify auto|always|done|never] [--watch <check>] [--max-tokens N] [--model <name>]',
  '       [--deliver origin,telegram:<chat>,slack:<channel>,discord:<channel>,https://…]',
  '  /heartbeat every 30m summarise what changed in the repo',
  'Control: /heartbeat status | pause | resume | clear',
].join('\n');
