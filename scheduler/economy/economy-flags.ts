/**
 * The economy flags of `/loop`, `/heartbeat`, `/goal`, `hermes loop|heartbeat|goal` and `hermes cron add`
 * (docs/CONTEXT.md): `--notify auto|always|done|never` (`notify.ts`), `--watch <check>`, `--max-tokens N`, `--model <name>`.
 * A pure parser over a command's tokens; what a flag may name (declared models, tools a surface may use)
 * is checked by `checkEconomy` (`economy-check.ts`) where the config is known.
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { NOTIFY_MODES, parseNotify, type NotifyMode } from './notify.ts';

/**
 * What a schedule may say about its turns' economy (docs/CONTEXT.md): `--notify`, `--watch`,
 * `--max-tokens`, `--model`. Loops, heartbeats and cron jobs take them all; goals all but `notify`.
 */
export interface ScheduleEconomy {
  notify?: NotifyMode;
  watch?: string | null;
  maxTokens?: number | null;
  model?: string | null;
}

/** The flags this parser takes (a value follows each). */
export const ECONOMY_FLAGS = ['--notify', '--watch', '--max-tokens', '--model'] as const;

/** Largest `--max-tokens`. */
export const MAX_TOKENS_LIMIT = 1_000_000_000;

/**
 * Take the economy flags (and their values) out of `tokens`.
 * @param options.notify - whether `--notify` is taken (not for goals, which have none)
 * @returns the flags found and the other tokens, in order
 * @throws ScheduleInputError for a flag without a value, an unknown `--notify` mode, a bad `--max-tokens`, a flag given twice
 */
export function takeEconomyFlags(
  tokens: readonly string[],
  options: { notify?: boolean } = {},
): { economy: ScheduleEconomy; rest: string[] } {
  const economy: ScheduleEconomy = {};
  const rest: string[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < tokens.length; i++) {
    const tok = tokens[i]!;
    const flag = (ECONOMY_FLAGS as readonly string[]).includes(tok) && (tok !== '--notify' || options.notify !== false) ? tok : undefined;
    if (!flag) {
      rest.push(tok);
      continue;
    }
    if (seen.has(flag)) throw new ScheduleInputError(`${flag} is given twice.`, { field: flag.slice(2) });
    seen.add(flag);
    const value = tokens[++i];
    if (value === undefined || value.startsWith('--'))
      throw new ScheduleInputError(`${flag} needs a value (${hint(flag)}).`, { field: flag.slice(2) });
    Object.assign(economy, parseEconomyValue(flag as (typeof ECONOMY_FLAGS)[number], value));
  }
  return { economy, rest };
}

/**
 * One economy setting from its flag and text value (the shell's options and `/api` fields use it too).
 * @throws ScheduleInputError naming the flag and the value
 */
export function parseEconomyValue(flag: (typeof ECONOMY_FLAGS)[number], value: string): ScheduleEconomy {
  switch (flag) {
    case '--notify':
      return { notify: parseNotify(value) };
    case '--max-tokens': {
      const n = /^\d+$/.test(value.replace(/[_,]/g, '')) ? Number(value.replace(/[_,]/g, '')) : NaN;
      if (!Number.isSafeInteger(n) || n < 1 || n > MAX_TOKENS_LIMIT) {
        throw new ScheduleInputError(
          `--max-tokens needs a positive whole number of tokens up to ${MAX_TOKENS_LIMIT.toLocaleString('en-US')}; got "${value}".`,
          { field: 'max_tokens' },
        );
      }
      return { maxTokens: n };
    }
    case '--watch':
      if (value.length > 2048) throw new ScheduleInputError('--watch is longer than 2048 characters.', { field: 'watch' });
      return { watch: value };
    case '--model':
      return { model: value };
  }
}

function hint(flag: string): string {
  switch (flag) {
    case '--notify':
      return NOTIFY_MODES.join(' | ');
    case '--watch':
      return 'a command tool, read_file:<path> or http_get:<url>';
    case '--max-tokens':
      return 'tokens, e.g. 200000';
    default:
      return 'a model name from agent.models';
  }
}
