/**
 * `--notify`: which replies and notices of a schedule reach its targets — one vocabulary for loops,
 * heartbeats and cron jobs (docs/CONTEXT.md, "Notify"), whatever surface sets it (CLI, chat, `/api`,
 * the console, MCP, the `schedules` tool). Every reply and notice stays in the session's transcript
 * and event stream (a cron job's run record) whatever this says.
 *
 * | Mode | Replies | Failure, pause and finish notices | Skipped or cancelled cron runs |
 * |---|---|---|---|
 * | `auto` (default) | every reply but a quiet one (`[SILENT]`) | sent | not told |
 * | `always` | every reply, a quiet one too, as written | sent | told |
 * | `done` | only the reply of the turn that finishes the schedule (a loop's last tick, a cron job's last run), unless quiet | sent | not told |
 * | `never` | every reply but a quiet one | not sent (the session's events keep them) | not told |
 *
 * `failure`, cron's earlier word for its default, is read as `auto` (records stored with it too).
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { isSilentReply } from './silent-reply.ts';

/** The `--notify` modes, default first. */
export const NOTIFY_MODES = ['auto', 'always', 'done', 'never'] as const;
export type NotifyMode = (typeof NOTIFY_MODES)[number];

/** Earlier words still accepted, and what they mean now. */
export const NOTIFY_ALIASES: Readonly<Record<string, NotifyMode>> = Object.freeze({ failure: 'auto' });

/** Every word a surface accepts for `--notify`: the modes, then the aliases (for choice lists and schemas). */
export const NOTIFY_WORDS = [...NOTIFY_MODES, 'failure'] as const;

/**
 * A mode from what a person or a client typed (any case; an alias read as its mode).
 * @param field - how the surface names the setting in its error (`--notify`, `` `notify` ``)
 * @throws ScheduleInputError naming the modes
 */
export function parseNotify(value: string, field = '--notify'): NotifyMode {
  const word = value.trim().toLowerCase();
  const mode = (NOTIFY_MODES as readonly string[]).includes(word)
    ? (word as NotifyMode)
    : Object.hasOwn(NOTIFY_ALIASES, word)
      ? NOTIFY_ALIASES[word]
      : undefined;
  if (mode === undefined) throw new ScheduleInputError(`${field} must be ${NOTIFY_MODES.join(', ')}; got "${value}".`, { field: 'notify' });
  return mode;
}

/** A stored mode as it reads now: absent is `auto`, an alias its mode (records are never rewritten for it). */
export function readNotify(stored: string | null | undefined): NotifyMode {
  if (stored === undefined || stored === null) return 'auto';
  if ((NOTIFY_MODES as readonly string[]).includes(stored)) return stored as NotifyMode;
  return Object.hasOwn(NOTIFY_ALIASES, stored) ? NOTIFY_ALIASES[stored]! : 'auto';
}

/**
 * Whether a turn's reply goes to the schedule's targets (the table at the top).
 * @param turn.quiet - the reply is quiet (`isSilentReply`)
 * @param turn.final - the turn finished the schedule
 */
export function notifyDeliversReply(mode: string | null | undefined, turn: { quiet: boolean; final: boolean }): boolean {
  const m = readNotify(mode);
  if (m === 'always') return true;
  if (turn.quiet) return false;
  return m !== 'done' || turn.final;
}

/** Whether a quiet reply is kept from the targets (the event's `silent` mark): all modes but `always`. */
export function notifyKeepsQuiet(mode: string | null | undefined, reply: string): boolean {
  return readNotify(mode) !== 'always' && isSilentReply(reply);
}

/** Whether failure and pause notices go to the targets: all modes but `never`. */
export function notifySendsNotices(mode: string | null | undefined): boolean {
  return readNotify(mode) !== 'never';
}

/** Whether a skipped occurrence (overlap or misfire) is told to the targets: `always` only. */
export function notifyTellsSkips(mode: string | null | undefined): boolean {
  return readNotify(mode) === 'always';
}
