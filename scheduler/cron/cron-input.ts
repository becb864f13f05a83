/**
 * What a user may type for a cron job (CLI flags, `/api` JSON, the agent's `schedules` tool), read
 * into checked values before anything is written (bad input changes nothing, docs/DESIGN.md §11).
 * Each reader throws `ScheduleInputError` naming the field; the commands (`cron-commands.ts`) put
 * the values together.
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import type { Origin } from '../session/origin.ts';
import type { CronSchedule } from './cron-engine.ts';
import {
  type CronEconomy,
  type CronJobCreator,
  type MisfirePolicy,
  type OverlapPolicy,
  MISFIRE_POLICIES,
  OVERLAP_POLICIES,
} from './cron-job.ts';
import { parseNotify as parseNotifyWord, type NotifyMode } from '../economy/notify.ts';
import { economyError, parseCronEconomy, type CronEconomyInput, type EconomyChecker } from './cron-economy.ts';
import { parseSchedule } from './schedule-grammar.ts';
import { parseIntervalToken } from '../interval.ts';
import type { WebhookAllowList } from '../delivery/webhook-policy.ts';

/** Limits and defaults of cron input, resolved once from the configuration (`cronServiceFor`, `../services.ts`). */
export interface CronInputSettings {
  /** Configured `timezone` (default zone of new jobs), else the host zone is used. */
  timezone: string | undefined;
  /** `cron.min_interval_seconds`. */
  minIntervalSeconds: number;
  /** `cron.max_schedule_chars`. */
  maxScheduleChars?: number;
  /** `agent.max_prompt_chars`. */
  maxPromptChars: number;
  /** `cron.history_limit`: the largest `runs --limit` that can return anything. */
  historyLimit: number;
  /** `cron.max_backfill_occurrences`: the most occurrences one backfill may queue. */
  maxBackfillOccurrences: number;
  /** `delivery.webhook_allow`, parsed; default empty (no internal webhook target is accepted). */
  webhookAllow?: WebhookAllowList;
  /**
   * Checks `--watch` and `--model` against the operator's config for a surface
   * (`checkEconomy`, `../economy/economy-check.ts`); absent = not checked (tests that pin settings).
   */
  checkEconomy?: EconomyChecker;
}

/** What `add` takes; strings as a user typed them (CLI flags or `/api` JSON). */
export interface CronJobInput {
  /** When it runs; may be left out when `after` is given (the job then runs only after other jobs). */
  schedule?: string;
  prompt?: string;
  name?: string;
  /** Comma list of targets; default `local`. */
  deliver?: string;
  /** Run this many times, then complete. */
  repeat?: number | string;
  tz?: string;
  /** Shell command (command turn); only trusted surfaces may set it. */
  script?: string;
  paused?: boolean;
  misfire?: string;
  /** `--catchup-window` of `--misfire all` (`6h`, `2d`, or whole seconds); default `cron.catchup_window_seconds`. */
  catchup_window?: string | number;
  overlap?: string;
  /** `always`, `failure` (default) or `never`: which runs send a notice to the targets. */
  notify?: string;
  /** Jitter window (`30s`, `5m`, or whole seconds; default 0): a fixed per-job offset in it shifts every fire (jitter.ts). */
  jitter?: string | number;
  /** `--watch`: a declared check run before each run (docs/CRON.md, "Economy"). */
  watch?: string;
  /** `--max-tokens`: tokens allowed until the next resume (agent jobs). */
  max_tokens?: number | string;
  /** `--model`: a declared model (`agent.models.<name>`; agent jobs). */
  model?: string;
  /** `--after <job>[:ok|error|any]`: run after each run of these jobs that ends so (`cron-after.ts`). */
  after?: string | string[];
  /** `--after-all`: one run once every `after` job has run in one window, instead of one after each (`checkAfterAll`). */
  after_all?: boolean;
}

/** What `edit` may change; absent fields stay. `null` clears `repeat`, `script`, `watch`, `max_tokens` or `model` (so does `none` from the CLI for the last three). */
export interface CronJobChanges extends CronEconomyInput {
  schedule?: string;
  prompt?: string;
  name?: string;
  deliver?: string;
  repeat?: number | string | null;
  tz?: string;
  script?: string | null;
  misfire?: string;
  /** New `--catchup-window`; `null` (the CLI's `none`) returns to `cron.catchup_window_seconds`. */
  catchup_window?: string | number | null;
  overlap?: string;
  notify?: string;
  /** New jitter window; `0` removes it. Re-arms the job from now. */
  jitter?: string | number;
  /** The jobs it runs after, replacing the list (`[]` or `null`: none; a job with no schedule of its own needs one). */
  after?: string | string[] | null;
  /** `--after-all` on (`true`) or off (`false`: after each); absent stays. Setting it, or the list, starts a new window. */
  after_all?: boolean;
}

/** Who is asking: the origin of new jobs, and whether it may create command turns. */
export interface CronCaller {
  origin: Origin;
  /** Only the CLI and config are trusted: they may set `script` (docs/DESIGN.md §3). */
  trusted: boolean;
  /** The agent asks (`schedules` tool), from this chat: new jobs record it (`created_by`). */
  createdBy?: CronJobCreator;
  /**
   * Further surfaces the asking turn answers to (the text in its context came from them): a new
   * job's runs answer to their `tools.allow_from` too (kept in `edited_from`), so a job made by a
   * turn never has tools that turn was kept from.
   */
  alsoFrom?: Array<Origin['surface']>;
}

/** A schedule as typed, in zone `tz`, relative forms anchored at `now`. */
export function parseCronSchedule(text: string, tz: string, now: number, settings: CronInputSettings): CronSchedule {
  return parseSchedule(text, { tz, now, minIntervalSeconds: settings.minIntervalSeconds, maxChars: settings.maxScheduleChars });
}

/** A `script` (command turn): only a trusted caller may set one (docs/DESIGN.md §3). */
export function parseScript(script: string | undefined, caller: CronCaller): string | null {
  if (script === undefined) return null;
  if (!caller.trusted) {
    throw new ScheduleInputError('Jobs with a `script` (command turns) can only be created from the CLI or the config file.', {
      field: 'script',
    });
  }
  if (script.trim() === '') throw new ScheduleInputError('`script` needs a command.', { field: 'script' });
  return script;
}

/**
 * A job with a `script` runs a command: only a trusted caller (the CLI, the config) may change,
 * resume or run it, since its prompt is the command's stdin and its schedule and targets decide when
 * the command runs and where its output goes (docs/DESIGN.md §3). Pausing and removing it stay open
 * to every caller: they start nothing.
 * @throws ScheduleInputError for an untrusted caller and a job with a script (nothing is written)
 */
export function assertMayDriveJob(
  job: { id: string; name: string; script: string | null },
  caller: CronCaller,
  action: 'change' | 'resume' | 'run' | 'backfill',
): void {
  if (caller.trusted || job.script === null) return;
  throw new ScheduleInputError(`Cron job ${job.id} "${job.name}" runs a command (script): only the CLI can ${action} it.`, {
    field: 'script',
  });
}

/** Economy fields, with errors in the asking surface's words. */
export function parseEconomyOf(input: CronEconomyInput, options: { clearable: boolean }, caller: CronCaller): CronEconomy {
  try {
    return parseCronEconomy(input, options);
  } catch (err) {
    throw economyError(err, caller.origin.surface);
  }
}

/** The prompt, trimmed: required unless the job has a `script`, at most `agent.max_prompt_chars`. */
export function parsePrompt(prompt: string, script: string | null, settings: Pick<CronInputSettings, 'maxPromptChars'>): string {
  const p = prompt.trim();
  if (p === '' && script === null) throw new ScheduleInputError('A cron job needs a prompt (or `script`).', { field: 'prompt' });
  if (p.length > settings.maxPromptChars) {
    throw new ScheduleInputError(
      `The prompt has ${p.length} characters; the limit is ${settings.maxPromptChars} (agent.max_prompt_chars).`,
      { field: 'prompt' },
    );
  }
  return p;
}

/** A name, spaces collapsed, 1 to 80 characters (whether it is taken is `CronCommands`'). */
export function parseName(name: string): string {
  const n = name.trim().replace(/\s+/g, ' ');
  if (n === '') throw new ScheduleInputError('`name` must not be empty.', { field: 'name' });
  if (n.length > 80) throw new ScheduleInputError(`\`name\` has ${n.length} characters; the limit is 80.`, { field: 'name' });
  return n;
}

/** `repeat`: a positive whole number, or `null` (forever). */
export function parseRepeat(value: number | string | undefined | null): number | null {
  if (value === undefined || value === null) return null;
  const n = typeof value === 'number' ? value : /^\s*\d+\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isInteger(n) || n < 1) {
    throw new ScheduleInputError(`\`repeat\` must be a positive whole number, got "${value}".`, { field: 'repeat' });
  }
  return n;
}

/** `misfire`: `skip`, `once` (default) or `all`. */
export function parseMisfire(value: string | undefined): MisfirePolicy {
  if (value === undefined) return 'once';
  if (isOneOf(MISFIRE_POLICIES, value)) return value;
  throw new ScheduleInputError(`\`misfire\` must be skip, once or all, got "${value}".`, { field: 'misfire' });
}

/**
 * `catchup_window`: a duration of at least a second (`30m`, `6h`, `2d`, or whole seconds); `none` (or `null`) for the
 * configured default. @returns seconds, or `null` for the default
 */
export function parseCatchupWindow(value: string | number | null | undefined): number | null {
  if (value === undefined || value === null || value === 'none') return null;
  const t = typeof value === 'number' ? String(value) : value.trim();
  const seconds = /^\d+$/.test(t) ? Number(t) : parseIntervalToken(t);
  if (seconds !== undefined && seconds >= 1) return seconds;
  throw new ScheduleInputError(`\`catchup_window\` must be a duration of a second or more (e.g. 30m, 6h, 2d), got "${value}".`, {
    field: 'catchup_window',
  });
}

/** `notify`: the one `--notify` vocabulary (`../economy/notify.ts`), `auto` by default. */
export function parseNotify(value: string | undefined): NotifyMode {
  return value === undefined ? 'auto' : parseNotifyWord(value, '`notify`');
}

/** `overlap`: `skip` (default), `queue`, `allow`, `buffer_all` or `cancel_other` (`OVERLAP_POLICIES`). */
export function parseOverlap(value: string | undefined): OverlapPolicy {
  if (value === undefined) return 'skip';
  if (isOneOf(OVERLAP_POLICIES, value)) return value;
  throw new ScheduleInputError(`\`overlap\` must be skip, queue, allow, buffer_all or cancel_other, got "${value}".`, { field: 'overlap' });
}

/** Whether `value` is one of `list` (narrows it to the list's union). */
function isOneOf<T extends string>(list: readonly T[], value: string): value is T {
  return (list as readonly string[]).includes(value);
}
