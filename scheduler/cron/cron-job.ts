/**
 * The cron job record (docs/DESIGN.md §7 Fields) and its transitions, as pure functions.
 * The store persists a `CronJob` as JSON; the field names are the ones the
 * spec, `hermes cron list --json` and `/api` show. Times are epoch milliseconds.
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import type { AgentCreator, Origin } from '../session/origin.ts';
import { isoUtc, nextOccurrence, type CronSchedule } from './cron-engine.ts';
import { compositeId } from '../store/keys.ts';
import type { WebhookAllowList } from '../delivery/webhook-policy.ts';
import { assertDeliverList, NO_WEBHOOK_ALLOW, parseDeliverList } from '../delivery/deliver-list.ts';
import { NO_TOTALS, spendWire, turnSpendWire, type ModelSpend, type SpendTotals, type TurnBudgetOverrun } from '../model-spend.ts';
import { isSilentReply } from '../economy/silent-reply.ts';
import { isBudgetPause } from '../economy/token-budget.ts';
import { notifyDeliversReply, readNotify, type NotifyMode } from '../economy/notify.ts';
import { failureRule, SCHEDULE_POLICY, type ScheduleLedger, type TurnEnd } from '../schedule-policy/schedule-policy.ts';
import { afterRunDigest, type CronAfter } from './cron-after.ts';

/** Where a cron job stands (`CronJob.state`): `completed` after its last repeat, `error` after its last repeat failed. */
export const CRON_JOB_STATES = ['scheduled', 'paused', 'completed', 'error'] as const;
export type CronJobState = (typeof CRON_JOB_STATES)[number];
/**
 * Beyond the grace window (`--misfire`): run one catch-up (`once`, the default), skip, or run every missed
 * occurrence inside the catch-up window (`all`, `--catchup-window`; docs/CRON.md).
 */
export const MISFIRE_POLICIES = ['once', 'skip', 'all'] as const;
export type MisfirePolicy = (typeof MISFIRE_POLICIES)[number];
/**
 * A job still running at its next occurrence (`--overlap`, docs/CRON.md "Overlap", with Temporal's names):
 * skip it (the default; SKIP), queue it (the newest waiting one runs next, the older ones coalesce;
 * close to BUFFER_ONE), allow both (ALLOW_ALL), buffer every one and run them in order, at most
 * `cron.max_buffered_occurrences` waiting (BUFFER_ALL, bounded), or cancel the running one and run
 * the new one once it has stopped (CANCEL_OTHER).
 */
export const OVERLAP_POLICIES = ['skip', 'queue', 'allow', 'buffer_all', 'cancel_other'] as const;
export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];
/**
 * How a cron run ended (`CronRun.status`, `CronJob.last_status`): `ok`, `error`, `skipped` (overlap,
 * a full overlap buffer, or misfire), or `cancelled` (stopped for a newer occurrence, `--overlap cancel_other`).
 */
export const CRON_RUN_STATUSES = ['ok', 'error', 'skipped', 'cancelled'] as const;
export type CronRunStatus = (typeof CRON_RUN_STATUSES)[number];
/**
 * What started a cron run: its schedule, a catch-up of a missed occurrence (`--misfire`), `hermes cron run`,
 * `hermes cron backfill` (a past occurrence of the schedule, run on request: `backfill.ts`), or the end of a run
 * of a job it runs after (`--after`, `CronRun.parent`).
 */
export const CRON_RUN_TRIGGERS = ['schedule', 'catch-up', 'manual', 'backfill', 'after'] as const;
export type CronRunTrigger = (typeof CRON_RUN_TRIGGERS)[number];
/**
 * What triggered an occurrence job: its schedule, `hermes cron run`, a backfill or a parent's run (a catch-up is
 * decided later, by the misfire rule).
 */
export type OccurrenceTrigger = Exclude<CronRunTrigger, 'catch-up'>;
/** Where one delivery of a cron run stands (`CronDelivery.status`; the meaning of each on `CronDelivery`). */
export const CRON_DELIVERY_STATUSES = ['pending', 'queued', 'sent', 'delivered', 'failed', 'silent'] as const;
export type CronDeliveryStatus = (typeof CRON_DELIVERY_STATUSES)[number];
/** A stored cron job. */
export interface CronJob {
  /** 12 hex characters. */
  id: string;
  name: string;
  /** The instruction of an agent turn; for `--script` jobs it is sent on stdin. */
  prompt: string;
  schedule: CronSchedule;
  /** IANA zone the schedule is read in (always set: `--tz`, config `timezone`, or the host zone at creation). */
  tz: string;
  repeat: { times: number | null; completed: number };
  /** Delivery targets in their text form (`../delivery/delivery-target.ts`): `local`, `origin`, `telegram:<chat>[:<thread>]`, `http(s)://…`. */
  deliver: string[];
  /** Shell command of a script job (a command turn); only the CLI or config may set it (docs/DESIGN.md §3). */
  script: string | null;
  misfire: MisfirePolicy;
  /**
   * `--catchup-window` of `--misfire all`, seconds: how far back missed occurrences are still run.
   * Absent or `null`: `cron.catchup_window_seconds`.
   */
  catchup_window_seconds?: number | null;
  overlap: OverlapPolicy;
  /**
   * `--notify` (`../economy/notify.ts`); records written before it existed read as `auto`, and so do
   * records that stored the earlier word `failure` (`readCronJob`).
   */
  notify?: NotifyMode;
  state: CronJobState;
  /** Why the job was paused by the product (a failure streak); `null` otherwise. */
  paused_reason?: string | null;
  /** Where the job was created; `origin` delivery goes to its route, else `local`. */
  origin: Origin;
  /**
   * Surfaces other than the CLI that have edited the job since the CLI last set its prompt
   * (`edit` from `/api`). The job's agent runs answer to their `tools.allow_from` as well as to
   * `cron` and the origin's (`cronToolSurfaces`), so editing a job is no way around a surface's
   * rule. Absent on records written before it existed, and when empty.
   */
  edited_from?: Array<Origin['surface']>;
  /**
   * Set when the agent made the job (`schedules` tool): the surface of the chat it talked in and
   * that chat's session, whose schedules the job counts among. Absent = a person made it.
   */
  created_by?: CronJobCreator | null;
  /**
   * `--watch`: the check run before each run (`read_file:<path>`, `http_get:<url>` or a command
   * tool's name; docs/CRON.md, "Economy"). An unchanged output ends the run without a model call
   * (or without the script). Absent or `null`: none.
   */
  watch?: string | null;
  /** Digest of the watch's output at the last successful run that ran it; `null` until then. */
  watch_digest?: string | null;
  /** `--max-tokens`: input plus output tokens allowed until the next resume; absent or `null` = no limit. */
  max_tokens?: number | null;
  /** Tokens counted against `max_tokens` since it was set or the job last resumed. */
  budget_tokens?: number;
  /** `--model`: a model the operator declared (`agent.models.<name>`); absent or `null` = the primary. */
  model?: string | null;
  /**
   * `--after`: the jobs this one runs after, each with the outcome it waits for (`cron-after.ts`); a job whose
   * `schedule` is of kind `after` has no times of its own. Absent or empty: none.
   */
  after?: CronAfter[];
  /** `--after-all`: one run once every job of `after` has run in one window (`cron-after.ts`, `checkAfterAll`); absent = after each. */
  after_all?: true;
  /** Model calls and tokens over the job's life (`../model-spend.ts`). */
  spend?: SpendTotals;
  /** Runs that ended without a model call (or script) because the watch's output had not changed. */
  unchanged_runs?: number;
  next_run_at: number | null;
  last_run_at: number | null;
  /** Due time of the last scheduled occurrence handled (run or skipped); older ones are coalesced. */
  last_due_at: number | null;
  last_status: CronRunStatus | null;
  last_error: string | null;
  failure_streak: number;
  created_at: number;
  updated_at: number;
  /** Bumped when the schedule is re-armed (edit of schedule/tz, resume); older occurrences are dropped. */
  generation: number;
  /** Bumped on every write; the store writes only over the version it read. */
  version: number;
}

/** Who made an agent-made job: the agent, from a chat's surface and session. */
export interface CronJobCreator extends AgentCreator {
  session_id: string;
}

/** Outcome of one delivery target for one run. */
export interface CronDelivery {
  target: string;
  /**
   * `delivered`: the target gave evidence (stream id, 2xx); `sent`: the
   * platform took every part of the reply (evidence: its message ids, reported
   * by the gateway); `queued`: handed to the durable outbound queue, not sent
   * yet (a failed attempt that will be retried stays `queued` with its error);
   * `pending`: not attempted yet; `failed`: given up (with the reason);
   * `silent`: a quiet reply (`[SILENT]`), not delivered.
   */
  status: CronDeliveryStatus;
  evidence?: string;
  error?: string;
  /** Platform message ids of a `sent` delivery, one per part, in order (Telegram: numbers; Slack: `ts` strings). */
  message_ids?: Array<number | string>;
  /** After a failed send attempt: whether it is tried again (transient error) or not (permanent, or attempts used up). */
  will_retry?: boolean;
  /** Send attempts the gateway made so far. */
  attempts?: number;
  /** When the gateway last reported on this delivery (epoch ms). */
  reported_at?: number;
}

/** One run record (docs/DESIGN.md §7 Output). */
export interface CronRun {
  occurrence_id: string;
  job_id: string;
  trigger: CronRunTrigger;
  status: CronRunStatus;
  /**
   * Why a run was skipped or cancelled: `overlap` (skipped: the previous run was still going;
   * cancelled: a newer occurrence replaced it), `buffer-full` (`--overlap buffer_all` had
   * `cron.max_buffered_occurrences` waiting already) or `misfire`.
   */
  reason: string | null;
  /**
   * How many times the occurrence was started before this record (1 = first
   * try; more after a drain hand-back, a dead worker or a network retry).
   * Missing on runs recorded before it existed.
   */
  attempts?: number;
  due_at: number;
  started_at: number | null;
  finished_at: number | null;
  lateness_ms: number;
  late: boolean;
  /** The reply, capped at `MAX_RUN_OUTPUT_CHARS` (the record is for reading, not delivery). */
  output: string | null;
  /**
   * What the targets get when it is not `output`: the whole reply when
   * `output` was cut (field report F20), or a failure notice. Kept only while
   * a delivery is pending, so a retry can finish it.
   */
  delivery_text?: string | null;
  error: string | null;
  /** The reply was quiet (`[SILENT]`: `../economy/silent-reply.ts`). */
  silent: boolean;
  /**
   * What the run's model calls cost (none for a script, a skip or an unchanged run).
   * Missing on runs recorded before it existed.
   */
  spend?: ModelSpend;
  /** The watch's output had not changed: the run ended `ok` with no model call and delivered nothing. */
  unchanged?: boolean;
  deliveries: CronDelivery[];
  worker_id: string;
  /** An `after` run: the parent run it follows. */
  parent?: CronRunParent;
  /** An `after` run of a job that waits for all its parents (`--after-all`): the parent runs it follows, by job id. */
  parents?: CronRunParent[];
  /**
   * The jobs this run starts (`--after` it with a matching outcome), decided with its commit: the hand-off after
   * the commit, and again on any retry of it, queues exactly these (once each, by the run's digest).
   */
  handoff?: string[];
}

/** The parent run an `after` run follows. */
export interface CronRunParent {
  job_id: string;
  occurrence_id: string;
  status: 'ok' | 'error';
}

/** Characters of output kept in a run record (the delivered reply is never cut). */
export const MAX_RUN_OUTPUT_CHARS = 8_000;

/**
 * Put a turn's reply on a run: `output` capped for the record, the whole
 * reply kept for delivery when it was cut (F20: every target gets all of it).
 */
export function withReply(run: CronRun, reply: string): CronRun {
  const silent = isSilentReply(reply);
  if (reply.length <= MAX_RUN_OUTPUT_CHARS) return { ...run, output: reply, silent };
  return { ...run, output: `${reply.slice(0, MAX_RUN_OUTPUT_CHARS)}\n[output cut]`, delivery_text: reply, silent };
}

/**
 * Whether a run's reply goes to the job's targets: an `ok` run that ran, as `--notify` says
 * (`notifyDeliversReply`; under `done` only the run that completes the job).
 * @param job - the job the run belongs to, as it was when the run started
 */
export function runDeliversReply(
  job: Pick<CronJob, 'notify' | 'schedule' | 'repeat'>,
  run: Pick<CronRun, 'status' | 'unchanged' | 'silent' | 'trigger'>,
): boolean {
  return run.status === 'ok' && !run.unchanged && notifyDeliversReply(job.notify, { quiet: run.silent, final: runIsLast(job, run) });
}

/** Whether a run completes its job: a scheduled run of a one-shot, or the last of `--repeat N`. */
export function runIsLast(job: Pick<CronJob, 'schedule' | 'repeat'>, run: Pick<CronRun, 'trigger'>): boolean {
  if (run.trigger === 'manual') return false;
  return job.schedule.kind === 'once' || (job.repeat.times !== null && job.repeat.completed + 1 >= job.repeat.times);
}

/** The text a delivery target gets for a run. */
export function deliveryText(run: CronRun): string {
  return run.delivery_text ?? run.output ?? '';
}

/** Session id of a cron job: its run output stream is this session's event stream. */
export function cronSessionId(jobId: string): string {
  return `cron:${jobId}`;
}

/**
 * Occurrence id of a scheduled occurrence, a manual run or a backfilled occurrence. A backfilled one has its
 * own id per (job, due time), apart from the scheduled occurrence of the same time: a retried or repeated
 * backfill request names the same occurrence, and the claim and commit run it once. An `after` run's is
 * `cronAfterOccurrenceId`.
 */
export function cronOccurrenceId(jobId: string, dueAt: number, trigger: Exclude<OccurrenceTrigger, 'after'>): string {
  return trigger === 'schedule' ? compositeId('cron', jobId, dueAt) : compositeId('cron', jobId, trigger, dueAt);
}

/** Whether an occurrence runs on request (`manual`, `backfill`): outside the schedule's state, generation and `--repeat` budget. */
export function onRequest(trigger: CronRunTrigger): trigger is 'manual' | 'backfill' {
  return trigger === 'manual' || trigger === 'backfill';
}

/** Occurrence id of the run of `jobId` after the parent run `parentOccurrenceId`: one per child and parent run. */
export function cronAfterOccurrenceId(jobId: string, parentOccurrenceId: string): string {
  return compositeId('cron', jobId, 'after', afterRunDigest(parentOccurrenceId));
}

/**
 * A cron job's delivery targets (`deliver-list.ts`, the rule every kind shares): the targets in their
 * text form, de-duplicated, `['local']` when none is given.
 * @throws ScheduleInputError (field `deliver`) naming a bad or refused target
 */
export function parseDeliver(value: string | undefined, allow: WebhookAllowList = NO_WEBHOOK_ALLOW): string[] {
  const targets = value === undefined ? [] : parseDeliverList(value);
  assertDeliverList(targets, allow);
  return targets.length === 0 ? ['local'] : targets;
}

/** A name from the start of the prompt (or script): at most 40 characters, whole words. */
export function defaultName(prompt: string, script: string | null): string {
  const source = (prompt.trim() || script?.trim() || 'cron job').replace(/\s+/g, ' ');
  if (source.length <= 40) return source;
  const cut = source.slice(0, 40);
  const space = cut.lastIndexOf(' ');
  return `${space > 15 ? cut.slice(0, space) : cut}…`;
}

/** Input to `createCronJob` (already validated). */
export interface NewCronJob {
  id: string;
  name: string | null;
  prompt: string;
  schedule: CronSchedule;
  tz: string;
  repeat: number | null;
  deliver: string[];
  script: string | null;
  misfire: MisfirePolicy;
  /** `--catchup-window`, seconds; `null` = the configured default. */
  catchupWindowSeconds?: number | null;
  overlap: OverlapPolicy;
  /** `--notify`; default `auto`. */
  notify?: NotifyMode;
  /** `--watch`, `--max-tokens`, `--model` (validated: `cron-economy.ts`). */
  economy?: CronEconomy;
  paused: boolean;
  origin: Origin;
  now: number;
  /** The agent made it (`schedules` tool). */
  createdBy?: CronJobCreator;
  /** `--after`, references resolved to ids. */
  after?: CronAfter[];
}

/** The economy settings of a job (docs/CRON.md, "Economy"); `null` = none. */
export interface CronEconomy {
  watch?: string | null;
  max_tokens?: number | null;
  model?: string | null;
}

/** A fresh job. */
export function createCronJob(input: NewCronJob): CronJob {
  const state: CronJobState = input.paused ? 'paused' : 'scheduled';
  return {
    id: input.id,
    name: input.name ?? defaultName(input.prompt, input.script),
    prompt: input.prompt,
    schedule: input.schedule,
    tz: input.tz,
    repeat: { times: input.repeat, completed: 0 },
    deliver: input.deliver,
    script: input.script,
    misfire: input.misfire,
    catchup_window_seconds: input.catchupWindowSeconds ?? null,
    overlap: input.overlap,
    notify: input.notify ?? 'auto',
    state,
    paused_reason: null,
    origin: input.origin,
    ...(input.createdBy ? { created_by: input.createdBy } : {}),
    watch: input.economy?.watch ?? null,
    watch_digest: null,
    max_tokens: input.economy?.max_tokens ?? null,
    budget_tokens: 0,
    model: input.economy?.model ?? null,
    ...(input.after && input.after.length > 0 ? { after: input.after } : {}),
    spend: { ...NO_TOTALS },
    unchanged_runs: 0,
    next_run_at: state === 'scheduled' ? firstDue(input.schedule, input.tz, input.now) : null,
    last_run_at: null,
    last_due_at: null,
    last_status: null,
    last_error: null,
    failure_streak: 0,
    created_at: input.now,
    updated_at: input.now,
    generation: 1,
    version: 0,
  };
}

/**
 * The first occurrence of a schedule that is armed at `now`. A one-shot that is
 * slightly in the past (accepted by the grammar) is due at once.
 */
export function firstDue(schedule: CronSchedule, tz: string, now: number): number | null {
  if (schedule.kind === 'once') return Math.max(schedule.atMs, now);
  if (schedule.kind === 'after') return null;
  return nextOccurrence(schedule, tz, now) ?? null;
}

/** Pause (pure); only a scheduled job changes. */
export function pauseCronJob(job: CronJob, now: number): CronJob | undefined {
  if (job.state !== 'scheduled') return undefined;
  return { ...job, state: 'paused', paused_reason: null, next_run_at: null, generation: job.generation + 1, updated_at: now };
}

/**
 * Resume (pure): the next occurrence after `now` — a paused job never catches
 * up what it missed. A one-shot whose time passed while paused cannot resume.
 * @throws ScheduleInputError for a one-shot in the past
 */
export function resumeCronJob(job: CronJob, now: number): CronJob | undefined {
  if (job.state !== 'paused') return undefined;
  if (job.schedule.kind === 'after') {
    return {
      ...job,
      state: 'scheduled',
      next_run_at: null,
      generation: job.generation + 1,
      updated_at: now,
      failure_streak: 0,
      paused_reason: null,
      ...(job.max_tokens ? { budget_tokens: 0 } : {}),
    };
  }
  const next =
    job.schedule.kind === 'once'
      ? job.schedule.atMs >= now
        ? job.schedule.atMs
        : null
      : (nextOccurrence(job.schedule, job.tz, now) ?? null);
  if (next === null) {
    throw new ScheduleInputError(
      `Job ${job.id} was a one-shot for ${isoUtc(job.schedule.kind === 'once' ? job.schedule.atMs : now)}, which has passed; give it a new \`schedule\` or run it once now.`,
      { field: 'ref' },
    );
  }
  // A resume gives a job paused by its failure streak fresh tries (the count starts again),
  // and a job with `--max-tokens` a fresh allowance.
  return {
    ...withLedger(job, SCHEDULE_POLICY.resume(cronLedger(job))),
    state: 'scheduled',
    next_run_at: next,
    generation: job.generation + 1,
    updated_at: now,
    paused_reason: null,
  };
}

/**
 * The job after a run or skip was recorded (pure).
 *
 * - Scheduled occurrences (`schedule`, `catch-up`) advance `last_due_at` (not one
 *   skipped as `buffer-full`: the buffered ones due before it are still to run),
 *   count towards `--repeat` (runs, not skips) and set `next_run_at` to the
 *   first occurrence after the later of the due time and the pick-up time —
 *   the same instant the BullMQ repeat strategy chose for the next job.
 * - Manual, backfilled and `after` runs change last status, error and failure
 *   streak only; the schedule and `next_run_at` stay as they were (field report F12).
 * - A one-shot is completed after its occurrence (state `error` if it failed);
 *   `--repeat N` completes the job after N runs.
 * - Spend, `--max-tokens`, the watch's digest, the unchanged count and the
 *   failure streak follow the schedule policy every kind shares
 *   (`../schedule-policy/schedule-policy.ts`); a scheduled job it pauses (a
 *   token budget, or `cron.max_consecutive_failures` failed runs in a row,
 *   0 = never) keeps the reason in `paused_reason` (`cron status` shows it).
 *   A cron job's calendar is its cadence: it does not back off.
 */
export function applyRun(
  job: CronJob,
  run: CronRun,
  pickedAt: number,
  now: number,
  options: {
    /** `cron.max_consecutive_failures`: failed runs in a row before a scheduled job pauses; 0 = never. */
    maxConsecutiveFailures: number;
    /**
     * The watch the run checked and its output's digest (kept only while the job still has that
     * watch); `null` for a check that failed, so the next run counts as changed.
     */
    watch?: { spec: string; digest: string | null };
    /** The run passed `agent.max_tokens_per_turn` (its answer kept, or it failed there): the job pauses at once. */
    overTurnBudget?: TurnBudgetOverrun;
  },
): CronJob {
  const turn: TurnEnd = {
    // A run cancelled for a newer occurrence (`--overlap cancel_other`) is no failure: the shared rules
    // read it as a turn that did not run (the streak untouched; what it spent is still counted).
    status: run.status === 'cancelled' ? 'skipped' : run.status,
    error: run.error,
    startedAt: run.started_at ?? now,
    finishedAt: run.finished_at ?? now,
    reply: run.status === 'ok' && !run.unchanged ? (run.delivery_text ?? run.output ?? '') : '',
    ...(run.spend ? { spend: run.spend } : {}),
    ...(run.unchanged ? { unchanged: true } : {}),
    ...(options.watch ? { watch: options.watch } : {}),
    ...(options.overTurnBudget ? { overTurnBudget: options.overTurnBudget } : {}),
  };
  // Spend, budget, watch digest, counts and the failure streak: the schedule policy's shared rules.
  const ledger = SCHEDULE_POLICY.afterTurn(cronLedger(job), turn);
  const next = withLedger(advance(job, run, pickedAt, now), ledger);
  const pause = (reason: string): CronJob => ({
    ...next,
    state: 'paused',
    next_run_at: null,
    generation: next.generation + 1,
    paused_reason: reason,
  });
  if (next.state !== 'scheduled') return next;
  const rule = failureRule({ max_consecutive_failures: options.maxConsecutiveFailures });
  const policyPause = SCHEDULE_POLICY.pauseAfter(ledger, turn, rule, 'run');
  return policyPause ? pause(policyPause.reason) : next;
}

/** Whether a job's `paused_reason` is the failure streak's (the others: token budgets). */
export function pausedByStreak(job: Pick<CronJob, 'paused_reason' | 'failure_streak'>): boolean {
  return SCHEDULE_POLICY.pausedByFailures(job.paused_reason, job.failure_streak);
}

/** Whether the job is paused by a token budget (`--max-tokens` or `agent.max_tokens_per_turn`); its `paused_reason` names the spend. */
export function pausedByBudget(job: Pick<CronJob, 'state' | 'paused_reason'>): boolean {
  return job.state === 'paused' && isBudgetPause(job.paused_reason);
}

/** A job's share of state under the shared rules (`ScheduleLedger`). */
export function cronLedger(job: CronJob): ScheduleLedger {
  return {
    failureStreak: job.failure_streak,
    failingSince: null,
    lastError: job.last_error,
    maxTokens: job.max_tokens ?? null,
    budgetTokens: job.budget_tokens ?? 0,
    spend: job.spend,
    watch: job.watch ?? null,
    watchDigest: job.watch_digest ?? null,
    unchangedTurns: job.unchanged_runs ?? 0,
    silentTurns: 0,
  };
}

/** The job with its share of state set from `ledger`. */
function withLedger(job: CronJob, ledger: ScheduleLedger): CronJob {
  const out: CronJob = { ...job, failure_streak: ledger.failureStreak, last_error: ledger.lastError };
  if (ledger.spend !== job.spend && ledger.spend) out.spend = ledger.spend;
  if (job.max_tokens) out.budget_tokens = ledger.budgetTokens;
  if (ledger.unchangedTurns !== (job.unchanged_runs ?? 0)) out.unchanged_runs = ledger.unchangedTurns;
  if (ledger.watchDigest !== (job.watch_digest ?? null)) out.watch_digest = ledger.watchDigest;
  return out;
}

function advance(job: CronJob, run: CronRun, pickedAt: number, now: number): CronJob {
  const next: CronJob = { ...job, updated_at: now, last_status: run.status };
  if (run.status !== 'skipped') next.last_run_at = run.started_at ?? now;
  if (onRequest(run.trigger) || run.trigger === 'after') return next;

  // An occurrence turned away by a full overlap buffer (`--overlap buffer_all`) handles none of the ones
  // waiting before it: they run after it is recorded, so it does not move the coalescing mark past them.
  if (run.reason !== 'buffer-full') next.last_due_at = Math.max(job.last_due_at ?? 0, run.due_at);
  if (run.status !== 'skipped') next.repeat = { ...job.repeat, completed: job.repeat.completed + 1 };
  if (job.state !== 'scheduled' || job.schedule.kind === 'after') return next;
  if (job.schedule.kind === 'once') {
    next.state = run.status === 'error' ? 'error' : 'completed';
    next.next_run_at = null;
    return next;
  }
  if (next.repeat.times !== null && next.repeat.completed >= next.repeat.times) {
    next.state = 'completed';
    next.next_run_at = null;
    return next;
  }
  next.next_run_at = nextOccurrence(job.schedule, job.tz, Math.max(run.due_at, pickedAt)) ?? null;
  if (next.next_run_at === null) next.state = 'completed';
  return next;
}

/** The public view of a job (`--json`, `/api`): the record with ISO-8601 UTC times. */
export function cronJobView(job: CronJob): Record<string, unknown> {
  const iso = (ms: number | null) => (ms === null ? null : isoUtc(ms));
  return {
    id: job.id,
    name: job.name,
    prompt: job.prompt,
    schedule: { kind: job.schedule.kind, expression: job.schedule.expression, display: job.schedule.display },
    tz: job.tz,
    repeat: job.repeat,
    deliver: job.deliver,
    script: job.script,
    misfire: job.misfire,
    catchup_window_seconds: job.catchup_window_seconds ?? null,
    overlap: job.overlap,
    notify: readNotify(job.notify),
    // `--jitter`: the window and this job's fixed offset in it (0 and 0 without jitter).
    jitter_seconds: job.schedule.kind === 'once' ? 0 : (job.schedule.jitter?.seconds ?? 0),
    jitter_offset_seconds: job.schedule.kind === 'once' ? 0 : (job.schedule.jitter?.offsetMs ?? 0) / 1000,
    state: job.state,
    // Why the product paused it, spelled as a loop's view spells it; `paused_reason` is the earlier name, kept.
    status_reason: job.paused_reason ?? null,
    paused_reason: job.paused_reason ?? null,
    next_run_at: iso(job.next_run_at),
    last_run_at: iso(job.last_run_at),
    last_status: job.last_status,
    last_error: job.last_error,
    failure_streak: job.failure_streak,
    // Economy (docs/CRON.md, "Economy"): null where unset, the budget too (no budget without `max_tokens`), as a loop's view.
    watch: job.watch ?? null,
    watch_digest: job.watch_digest ?? null,
    model: job.model ?? null,
    max_tokens: job.max_tokens ?? null,
    budget_tokens: job.max_tokens ? (job.budget_tokens ?? 0) : null,
    spend: spendWire(job.spend),
    unchanged_runs: job.unchanged_runs ?? 0,
    // `--after`: the jobs it runs after and the outcome each must end with; [] = none.
    after: job.after ?? [],
    // `--after-all`: one run once every job of `after` has run in one window; false = after each.
    after_all: job.after_all === true,
    // Whose `tools.allow_from` its agent runs answer to (cronToolSurfaces).
    tool_surfaces: cronToolSurfaces(job),
    // The agent made it (`schedules` tool): `{ by: 'agent', surface, session_id }`; null = a person did.
    created_by: job.created_by ?? null,
    created_at: iso(job.created_at),
  };
}

/** The public view of a run record. */
export function cronRunView(run: CronRun): Record<string, unknown> {
  const iso = (ms: number | null) => (ms === null ? null : isoUtc(ms));
  return {
    unchanged: false,
    ...run,
    spend: turnSpendWire(run.spend),
    due_at: iso(run.due_at),
    started_at: iso(run.started_at),
    finished_at: iso(run.finished_at),
  };
}

/**
 * The surfaces whose `tools.allow_from` a job's agent runs answer to: `cron`, then the
 * surface that created the job and every surface that has edited it, except the CLI (the
 * operator's own; its jobs need only `cron`).
 */
export function cronToolSurfaces(job: Pick<CronJob, 'origin' | 'edited_from'>): Array<'cron' | Origin['surface']> {
  const others = [job.origin.surface, ...(job.edited_from ?? [])].filter((s) => s !== 'cli');
  return ['cron', ...new Set(others)];
}
