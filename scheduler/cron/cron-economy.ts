/**
 * The economy settings of cron jobs (docs/CRON.md, "Economy"; the policies:
 * docs/CONTEXT.md): `--watch <check>`, `--max-tokens N`, `--model <name>` on
 * `hermes cron add|edit`, and `watch`, `max_tokens`, `model` in the `/api`
 * bodies. `--notify` is parsed with the job's other policies (`cron-input.ts`,
 * through `../economy/notify.ts`).
 *
 * Parsed and checked before anything is written (bad input changes nothing):
 * - values as `parseEconomyValue` reads them for loops (`../economy/economy-flags.ts`);
 * - a script job makes no model calls: `--model` and `--max-tokens` are refused
 *   for it (a watch still applies: an unchanged check skips the script);
 * - what the flags name is checked by the `checkEconomy` the service was given
 *   (`../economy/economy-check.ts`: declared models, declared checks, `tools.allow_from`)
 *   for the surface asking and for every surface the job's runs answer to
 *   (`cronToolSurfaces`: `cron`, and `api` for a job created or edited over `/api`),
 *   so a watch the runs could not use is refused when it is set.
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { parseEconomyValue, type ScheduleEconomy } from '../economy/economy-flags.ts';
import type { CronEconomy } from './cron-job.ts';

/** Economy values as a surface gave them: CLI text, `/api` JSON; `null` (or `none` from the CLI on `edit`) clears one. */
export interface CronEconomyInput {
  watch?: string | null;
  max_tokens?: number | string | null;
  model?: string | null;
}

/** Checks the economy flags against the operator's config for one surface (`checkEconomy`). @throws ScheduleInputError */
export type EconomyChecker = (economy: ScheduleEconomy, surface: string) => void;

/** The word that clears a setting on `hermes cron edit` (`--watch none`, `--max-tokens none`, `--model none`). */
export const CLEAR_WORD = 'none';

/**
 * Parse the economy fields of an `add` or `edit` (only the fields given).
 * @param options.clearable - `edit`: `null` or `none` clears a setting
 * @throws ScheduleInputError naming the field
 */
export function parseCronEconomy(input: CronEconomyInput, options: { clearable: boolean }): CronEconomy {
  const out: CronEconomy = {};
  const cleared = (v: unknown) => v === null || (options.clearable && typeof v === 'string' && v.trim().toLowerCase() === CLEAR_WORD);
  if (input.watch !== undefined) {
    if (cleared(input.watch)) out.watch = null;
    else if (input.watch === null || input.watch.trim() === '')
      throw new ScheduleInputError('--watch needs a check: a command tool, read_file:<path> or http_get:<url>.', { field: 'watch' });
    else out.watch = parseEconomyValue('--watch', input.watch.trim()).watch ?? null;
  }
  if (input.max_tokens !== undefined) {
    out.max_tokens = cleared(input.max_tokens)
      ? null
      : (parseEconomyValue('--max-tokens', String(input.max_tokens).trim()).maxTokens ?? null);
  }
  if (input.model !== undefined) {
    if (cleared(input.model)) out.model = null;
    else if (input.model === null || input.model.trim() === '')
      throw new ScheduleInputError('--model needs a model name from agent.models.', { field: 'model' });
    else out.model = input.model.trim();
  }
  return out;
}

/**
 * Check a job's economy as it will be stored.
 * @param job.script - the job's script (`null` for an agent job)
 * @param check.changed - the fields this call sets (only those are checked against the config, plus
 *   the watch whenever the surfaces grew: an edit from a new surface makes the runs answer to it)
 * @param check.surfaces - the surface asking first, then the job's run surfaces (`cronToolSurfaces`)
 * @throws ScheduleInputError naming the field, with the message in the asking surface's words
 */
export function checkCronEconomy(
  job: { script: string | null; economy: CronEconomy },
  check: { changed: CronEconomy; surfacesGrew: boolean; surfaces: readonly string[]; checker: EconomyChecker | undefined; asker: string },
): void {
  try {
    const { economy } = job;
    if (job.script !== null && (economy.model || economy.max_tokens)) {
      const which = [economy.model ? '--model' : '', economy.max_tokens ? '--max-tokens' : ''].filter(Boolean).join(' and ');
      throw new ScheduleInputError(
        `${which}: a \`script\` job makes no model calls, so it takes no model or token budget (--watch still applies).`,
        { field: economy.model ? 'model' : 'max_tokens' },
      );
    }
    if (!check.checker) return;
    const wanted: ScheduleEconomy = {};
    if (check.changed.model) wanted.model = check.changed.model;
    if (economy.watch && (check.changed.watch !== undefined || check.surfacesGrew)) wanted.watch = economy.watch;
    if (!wanted.model && !wanted.watch) return;
    for (const surface of new Set(check.surfaces)) check.checker(wanted, surface);
  } catch (err) {
    if (err instanceof ScheduleInputError && check.asker !== 'cli') throw inFieldWords(err);
    throw err;
  }
}

/**
 * The error as `/api` speaks: fields in backticks as the JSON body spells them (`` `max_tokens` ``),
 * not the CLI's flags (the CLI writes flags for backticked fields itself: `cli/run-command.ts`).
 */
function inFieldWords(err: ScheduleInputError): ScheduleInputError {
  const message = err.message
    .replace(/--max-tokens\b/g, '`max_tokens`')
    .replace(/--watch\b/g, '`watch`')
    .replace(/--model\b/g, '`model`');
  return new ScheduleInputError(message, { field: err.field, cause: err });
}

/** Errors of `parseCronEconomy` for a surface other than the CLI, in its words. */
export function economyError(err: unknown, asker: string): unknown {
  return err instanceof ScheduleInputError && asker !== 'cli' ? inFieldWords(err) : err;
}
