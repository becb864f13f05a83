/**
 * Changing cron jobs: the one set of commands the `hermes cron` CLI, the gateway's `/api` and the
 * agent's `schedules` tool all call, so every rule lives here once. The pure functions of
 * cron-job.ts decide, the store persists; input is read by `cron-input.ts`.
 *
 * Every input is validated before anything is written (bad input changes
 * nothing, docs/DESIGN.md §11). A change is reported only after Redis confirmed it: the
 * record is written first (version-checked), then the BullMQ side is armed or
 * disarmed. Pause and remove therefore take effect when they return: no run of
 * the job starts after that, even when its next BullMQ job is already waiting
 * (the worker's claim re-checks the record).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { readNotify } from '../economy/notify.ts';
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { StoreUnavailableError } from '../errors/store-unavailable-error.ts';
import { assertTimeZone, defaultTimeZone, type CronSchedule } from './cron-engine.ts';
import {
  createCronJob,
  cronToolSurfaces,
  firstDue,
  parseDeliver,
  pauseCronJob,
  pausedByBudget,
  resumeCronJob,
  type CronEconomy,
  type CronJob,
} from './cron-job.ts';
import { checkCronEconomy } from './cron-economy.ts';
import {
  assertMayDriveJob,
  parseCronSchedule,
  parseEconomyOf,
  parseCatchupWindow,
  parseMisfire,
  parseName,
  parseNotify,
  parseOverlap,
  parsePrompt,
  parseRepeat,
  parseScript,
  type CronCaller,
  type CronInputSettings,
  type CronJobChanges,
  type CronJobInput,
} from './cron-input.ts';
import type { CronQueries } from './cron-queries.ts';
import type { CronStore } from './cron-store.ts';
import { jitterSecondsOf, parseJitter, withJitter } from './jitter.ts';
import { backfillOccurrences, parseBackfillWindow, type BackfillWindow } from './backfill.ts';
import { CONFLICT, retryOnConflict } from '../store/optimistic-retry.ts';
import { AFTER_ONLY_SCHEDULE, checkAfterAll, findAfterCycle, parseAfterSpecs, type AfterSpec, type CronAfter } from './cron-after.ts';
import { resolveJobRef } from './job-ref.ts';
import { UnknownJobError } from '../errors/unknown-job-error.ts';

/**
 * A new job from `input`, every field validated, with no I/O: `CronCommands.add` stores what this
 * returns (its name made unique), and the CLI calls it before it connects, so a bad schedule is
 * refused as bad input even when Redis is down (field report F30).
 * @param now - epoch ms: relative schedules are anchored here
 * @throws ScheduleInputError for any bad field
 */
export function newCronJob(input: CronJobInput, caller: CronCaller, settings: CronInputSettings, now: number): CronJob {
  const tz = defaultTimeZone(input.tz, settings.timezone);
  const id = randomBytes(6).toString('hex');
  const jitterSeconds = input.jitter === undefined ? 0 : parseJitter(input.jitter);
  // `--after` (cron-after.ts): read here, its references resolved by `CronCommands.add`.
  const after = parseAfterSpecs(input.after);
  const afterAll = checkAfterAll(input.after_all, after?.length ?? 0);
  if (input.schedule === undefined && !after?.length) {
    throw new ScheduleInputError('A cron job needs a `schedule` (or `after`: the jobs it runs after).', { field: 'schedule' });
  }
  const own = input.schedule === undefined ? AFTER_ONLY_SCHEDULE : parseCronSchedule(input.schedule, tz, now, settings);
  const schedule = withJitter(own, id, jitterSeconds);
  if (schedule.kind === 'after' && input.repeat !== undefined) throw repeatWithoutSchedule();
  const script = parseScript(input.script, caller);
  const prompt = parsePrompt(input.prompt ?? '', script, settings);
  const economy = parseEconomyOf({ watch: input.watch, max_tokens: input.max_tokens, model: input.model }, { clearable: false }, caller);
  const alsoFrom = [...new Set((caller.alsoFrom ?? []).filter((s) => s !== 'cli' && s !== caller.origin.surface))];
  checkCronEconomy(
    { script, economy },
    {
      changed: economy,
      surfacesGrew: false,
      checker: settings.checkEconomy,
      asker: caller.origin.surface,
      surfaces: [caller.origin.surface, ...cronToolSurfaces({ origin: caller.origin, edited_from: alsoFrom })],
    },
  );
  const job = createCronJob({
    id,
    name: input.name === undefined ? null : parseName(input.name),
    prompt,
    schedule,
    tz,
    repeat: parseRepeat(input.repeat),
    deliver: parseDeliver(input.deliver, settings.webhookAllow),
    script,
    misfire: parseMisfire(input.misfire),
    catchupWindowSeconds: parseCatchupWindow(input.catchup_window),
    overlap: parseOverlap(input.overlap),
    notify: parseNotify(input.notify),
    economy,
    paused: input.paused === true,
    origin: caller.origin,
    now,
    createdBy: caller.createdBy,
  });
  if (alsoFrom.length > 0) job.edited_from = alsoFrom;
  if (afterAll) job.after_all = true;
  return job;
}

/** Commands that create, change, run and remove cron jobs. */
export class CronCommands {
  constructor(
    private readonly store: CronStore,
    /** Resolves the references commands take. */
    private readonly queries: Pick<CronQueries, 'resolveRef'>,
    private readonly settings: CronInputSettings,
    private readonly log: Logger,
    private readonly clock: () => number = Date.now,
  ) {}

  /**
   * Create a job and arm its first occurrence.
   * @throws ScheduleInputError for any bad field (nothing is written);
   *   StoreUnavailableError when Redis refused the write
   */
  async add(input: CronJobInput, caller: CronCaller): Promise<CronJob> {
    const now = this.clock();
    const job = newCronJob(input, caller, this.settings, now);
    job.name = await this.uniqueName(job.name, input.name !== undefined);
    const specs = parseAfterSpecs(input.after);
    if (specs?.length) {
      // A new job has no children yet, so it closes no cycle; its parents list it before its record names them.
      job.after = resolveAfter(specs, await this.store.list());
      await this.store.linkChildren(
        job.id,
        job.after.map((a) => a.job_id),
      );
    }
    const stored = await this.store.put(job, 'absent');
    if (!stored) throw new StoreUnavailableError(`Cron job id ${job.id} already exists; try again.`);
    await this.store.arm(stored, now);
    this.log.info({ cronJobId: stored.id, kind: stored.schedule.kind, tz: stored.tz, state: stored.state }, 'cron job added');
    return stored;
  }

  /**
   * Change fields of a job. A new schedule or zone re-arms it from now (no
   * catch-up of the old schedule's occurrences).
   * @throws ScheduleInputError for a bad reference or field (nothing is written)
   */
  async edit(ref: string, changes: CronJobChanges, caller: CronCaller): Promise<CronJob> {
    if (Object.values(changes).every((v) => v === undefined)) {
      throw new ScheduleInputError(
        'Nothing to change: give at least one of `schedule`, `prompt`, `name`, `deliver`, `repeat`, `tz`, `script`, `misfire`, `catchup_window`, `overlap`, `notify`, `jitter`, `watch`, `max_tokens`, `model`, `after`.',
      );
    }
    const current = await this.queries.resolveRef(ref);
    assertMayDriveJob(current, caller, 'change');
    const now = this.clock();
    // Validate everything before the first write.
    const tz = changes.tz !== undefined ? assertTimeZone(changes.tz) : current.tz;
    const rearm = changes.schedule !== undefined || changes.tz !== undefined || changes.jitter !== undefined;
    let schedule: CronSchedule = current.schedule;
    if (changes.schedule !== undefined) schedule = this.parseSchedule(changes.schedule, tz, now);
    else if (changes.tz !== undefined && schedule.kind === 'cron') schedule = this.parseSchedule(schedule.expression, tz, now);
    // The jitter stays unless changed, and must fit the (new) schedule.
    const jitterSeconds = changes.jitter !== undefined ? parseJitter(changes.jitter) : jitterSecondsOf(current.schedule);
    schedule = withJitter(schedule, current.id, jitterSeconds);
    const script = changes.script === undefined ? current.script : changes.script === null ? null : parseScript(changes.script, caller);
    const prompt =
      changes.prompt !== undefined
        ? parsePrompt(changes.prompt, script, this.settings)
        : parsePrompt(current.prompt, script, this.settings);
    // Economy (docs/CRON.md, "Economy"): checked as the job will be, for the surfaces its runs will answer to.
    const economyChanges = parseEconomyOf(
      { watch: changes.watch, max_tokens: changes.max_tokens, model: changes.model },
      { clearable: true },
      caller,
    );
    const economy: CronEconomy = {
      watch: economyChanges.watch !== undefined ? economyChanges.watch : (current.watch ?? null),
      max_tokens: economyChanges.max_tokens !== undefined ? economyChanges.max_tokens : (current.max_tokens ?? null),
      model: economyChanges.model !== undefined ? economyChanges.model : (current.model ?? null),
    };
    const alsoFrom = (caller.alsoFrom ?? []).filter((s) => s !== 'cli');
    const editedFromAfter = (from: CronJob['edited_from']) => [
      ...new Set([
        ...(caller.origin.surface !== 'cli' ? [...(from ?? []), caller.origin.surface] : changes.prompt !== undefined ? [] : (from ?? [])),
        ...alsoFrom,
      ]),
    ];
    const surfacesBefore = cronToolSurfaces(current);
    const surfacesAfter = cronToolSurfaces({ origin: current.origin, edited_from: editedFromAfter(current.edited_from) });
    checkCronEconomy(
      { script, economy },
      {
        changed: economyChanges,
        surfacesGrew: surfacesAfter.some((s) => !surfacesBefore.includes(s)),
        checker: this.settings.checkEconomy,
        asker: caller.origin.surface,
        surfaces: [caller.origin.surface, ...surfacesAfter],
      },
    );
    // `--after` replaces the list: checked for a cycle over every job's parents as stored now.
    let after: CronAfter[] = current.after ?? [];
    if (changes.after !== undefined) {
      const jobs = await this.store.list();
      after = changes.after === null ? [] : resolveAfter(parseAfterSpecs(changes.after) ?? [], jobs);
      assertNoCycle(current, after, jobs);
    }
    if (schedule.kind === 'after' && after.length === 0) {
      throw new ScheduleInputError(
        `Cron job "${current.name}" (${current.id}) has no schedule of its own: it needs at least one \`after\` (or give it a \`schedule\`).`,
        { field: 'after' },
      );
    }
    const afterAll = checkAfterAll(changes.after_all ?? current.after_all === true, after.length);
    // A new list of parents, or `after_all` set or cleared, starts the window of `--after-all` afresh.
    const newWindow = changes.after !== undefined || afterAll !== (current.after_all === true);
    const afterIds = after.map((a) => a.job_id);
    const dropped = (current.after ?? []).map((a) => a.job_id).filter((id) => !afterIds.includes(id));
    const fields = {
      name: changes.name !== undefined ? await this.uniqueName(parseName(changes.name), true, current.id) : current.name,
      deliver: changes.deliver !== undefined ? parseDeliver(changes.deliver, this.settings.webhookAllow) : current.deliver,
      repeatTimes: changes.repeat !== undefined ? (changes.repeat === null ? null : parseRepeat(changes.repeat)) : current.repeat.times,
      misfire: changes.misfire !== undefined ? parseMisfire(changes.misfire) : current.misfire,
      catchupWindow:
        changes.catchup_window !== undefined ? parseCatchupWindow(changes.catchup_window) : (current.catchup_window_seconds ?? null),
      overlap: changes.overlap !== undefined ? parseOverlap(changes.overlap) : current.overlap,
      notify: changes.notify !== undefined ? parseNotify(changes.notify) : readNotify(current.notify),
    };
    if (schedule.kind === 'after' && fields.repeatTimes !== null) throw repeatWithoutSchedule();
    // The parents list the job before its record names them (the index is never short of a child).
    if (changes.after !== undefined) await this.store.linkChildren(current.id, afterIds);
    const { stored, previous } = await this.write(current.id, (cur) => {
      const next: CronJob = {
        ...cur,
        prompt,
        script,
        schedule,
        tz,
        name: fields.name,
        deliver: fields.deliver,
        misfire: fields.misfire,
        catchup_window_seconds: fields.catchupWindow,
        overlap: fields.overlap,
        notify: fields.notify,
        repeat: { times: fields.repeatTimes, completed: cur.repeat.completed },
        updated_at: now,
        watch: economy.watch,
        model: economy.model,
        max_tokens: economy.max_tokens,
      };
      if (after.length > 0) next.after = after;
      else delete next.after;
      if (afterAll) next.after_all = true;
      else delete next.after_all;
      // A new watch starts from its first run; a new --max-tokens counts from now.
      if ((economy.watch ?? null) !== (cur.watch ?? null)) next.watch_digest = null;
      if (economyChanges.max_tokens !== undefined) next.budget_tokens = 0;
      // Who changed the job decides, with its creator, which tools its runs may use (cronToolSurfaces).
      const editedFrom = editedFromAfter(cur.edited_from);
      if (editedFrom.length > 0) next.edited_from = editedFrom;
      else delete next.edited_from;
      if (rearm) {
        next.generation = cur.generation + 1;
        next.last_due_at = null;
        if (cur.state === 'completed' || cur.state === 'error' || cur.state === 'scheduled') next.state = 'scheduled';
        next.next_run_at = next.state === 'scheduled' ? firstDue(schedule, tz, now) : null;
      }
      if (next.repeat.times !== null && next.repeat.completed >= next.repeat.times && next.state === 'scheduled') {
        next.repeat = { times: next.repeat.times, completed: 0 };
      }
      return next;
    });
    if (rearm) {
      await this.store.disarm(previous);
      await this.store.arm(stored, now);
    }
    if (dropped.length > 0) await this.store.unlinkChildren(current.id, dropped);
    if (newWindow) await this.store.resetAfterAll(current.id);
    this.log.info({ cronJobId: stored.id, rearmed: rearm }, 'cron job edited');
    return stored;
  }

  /**
   * Pause: once this returns no run of the job starts until it is resumed.
   * @returns the job and whether it changed (a job that is not scheduled stays as it is)
   */
  async pause(ref: string): Promise<{ job: CronJob; changed: boolean }> {
    const current = await this.queries.resolveRef(ref);
    const now = this.clock();
    const { stored, changed } = await this.tryWrite(current.id, (cur) => pauseCronJob(cur, now));
    await this.store.disarm(current);
    if (changed) this.log.info({ cronJobId: stored.id }, 'cron job paused');
    return { job: stored, changed };
  }

  /**
   * Resume a paused job at its next occurrence after now (never a catch-up);
   * with `runNow` also run it once right away.
   * @throws ScheduleInputError for a one-shot whose time passed while paused; for a job with a
   *   script and an untrusted caller (`assertMayDriveJob`)
   */
  async resume(
    ref: string,
    caller: CronCaller,
    options: { runNow?: boolean } = {},
  ): Promise<{ job: CronJob; changed: boolean; manualJobId?: string }> {
    const current = await this.queries.resolveRef(ref);
    assertMayDriveJob(current, caller, 'resume');
    const now = this.clock();
    const { stored, changed } = await this.tryWrite(current.id, (cur) => resumeCronJob(cur, now));
    if (changed) {
      await this.store.arm(stored, now);
      this.log.info({ cronJobId: stored.id }, 'cron job resumed');
    }
    const manualJobId = options.runNow ? await this.store.enqueueManual(stored, now) : undefined;
    return { job: stored, changed, manualJobId };
  }

  /**
   * Run the job now, once, outside its schedule (also when paused). The
   * schedule and `next_run_at` are not changed (field report F12). A job
   * paused by a token budget runs only with `force` (docs/CRON.md, "Economy"):
   * its budget is spent, and a run would spend more.
   * @returns the job and the occurrence's BullMQ job id
   * @throws ScheduleInputError for a job with a script and an untrusted caller (`assertMayDriveJob`); for a job
   *   paused by its budget without `force` (field `force`, the spend named)
   */
  async runNow(
    ref: string,
    caller: CronCaller,
    options: { force?: boolean } = {},
  ): Promise<{ job: CronJob; manualJobId: string; dueAt: number }> {
    const job = await this.queries.resolveRef(ref);
    assertMayDriveJob(job, caller, 'run');
    if (pausedByBudget(job) && !options.force) {
      throw new ScheduleInputError(
        `Cron job "${job.name}" (${job.id}) is paused by its token budget: ${job.paused_reason}. A run now would spend more; resume it (a fresh allowance) or run it with \`force\`.`,
        { field: 'force' },
      );
    }
    const now = this.clock();
    const manualJobId = await this.store.enqueueManual(job, now);
    this.log.info({ cronJobId: job.id, manualJobId }, 'cron job run requested');
    return { job, manualJobId, dueAt: now };
  }

  /**
   * Backfill (docs/CRON.md, "Backfill"; `backfill.ts`): queue the occurrences the job's schedule had from
   * `from` to `to` (default now; a future `to` is clipped to now), each to run once, oldest first, as a run
   * with trigger `backfill` under the job's `--overlap`. Like a manual run it runs also when the job is
   * paused, and a job paused by its token budget only with `force`. Occurrences already recorded as
   * backfilled are not queued again (`CronStore.enqueueBackfill`).
   * @returns the job, the window read, and the due times queued and already recorded (oldest first)
   * @throws ScheduleInputError for a bad window, one with more than `cron.max_backfill_occurrences`
   *   occurrences (nothing queued), an untrusted caller of a script job, a job paused by its budget without `force`
   */
  async backfill(
    ref: string,
    caller: CronCaller,
    input: { from?: string; to?: string; force?: boolean },
  ): Promise<{ job: CronJob; window: BackfillWindow; queued: number[]; recorded: number[] }> {
    const job = await this.queries.resolveRef(ref);
    assertMayDriveJob(job, caller, 'backfill');
    const window = parseBackfillWindow(input, job.tz, this.clock());
    const dueTimes = backfillOccurrences(job.schedule, job.tz, window, this.settings.maxBackfillOccurrences);
    if (pausedByBudget(job) && !input.force && dueTimes.length > 0) {
      throw new ScheduleInputError(
        `Cron job "${job.name}" (${job.id}) is paused by its token budget: ${job.paused_reason}. A backfill would spend more; resume it (a fresh allowance) or backfill with \`force\`.`,
        { field: 'force' },
      );
    }
    const { queued, recorded } = await this.store.enqueueBackfill(job, dueTimes);
    this.log.info({ cronJobId: job.id, queued: queued.length, recorded: recorded.length }, 'cron job backfill requested');
    return { job, window, queued, recorded };
  }

  /**
   * Remove the job, its history and its BullMQ jobs; no run starts more than a second after this returns
   * (an occurrence due before it, read at its due time: `worker/cron/cron-claim-ahead.ts`). @returns the removed job
   */
  async remove(ref: string): Promise<CronJob> {
    const job = await this.queries.resolveRef(ref);
    await this.store.delete(job.id);
    await this.store.disarm(job);
    // Its parents no longer hand off to it; the jobs after it keep naming it, and run no more after it.
    await this.store.unlinkChildren(
      job.id,
      (job.after ?? []).map((a) => a.job_id),
    );
    await this.store.forgetChildren(job.id);
    this.log.info({ cronJobId: job.id }, 'cron job removed');
    return job;
  }

  /**
   * Names are unique (case-insensitive, like references), so a name always
   * resolves to one job. An explicit name that another job has — or that is
   * another job's id — is refused; a name derived from the prompt gets a
   * number (` (2)`, ` (3)`, …). Checked before the write: two adds racing with
   * the same name can still both pass; the reference then lists both ids.
   * @throws ScheduleInputError for a taken explicit name
   */
  private async uniqueName(name: string, explicit: boolean, selfId?: string): Promise<string> {
    // Two lookups, never a read of every job (adding the 10,000th job read all 10,000): the job with that id,
    // and the jobs of that name in any case from the name order (`withNameInAnyCase`), whatever its letters.
    const taken = async (n: string): Promise<CronJob | undefined> => {
      const byId = n === selfId ? null : await this.store.get(n);
      if (byId) return byId;
      return (await this.store.withNameInAnyCase(n)).find((j) => j.id !== selfId);
    };
    const holder = await taken(name);
    if (!holder) return name;
    if (explicit) {
      if (holder.id === name && holder.name.toLowerCase() !== name.toLowerCase()) {
        throw new ScheduleInputError(
          `"${name}" is the id of the cron job "${holder.name}"; a name may not be another job's id (references would be ambiguous). Choose another \`name\`.`,
          { field: 'name' },
        );
      }
      throw new ScheduleInputError(
        `A cron job named "${holder.name}" already exists (${holder.id}); choose another \`name\` or edit that job.`,
        { field: 'name' },
      );
    }
    for (let i = 2; ; i++) if (!(await taken(`${name} (${i})`))) return `${name} (${i})`;
  }

  /** Read-modify-write with the version check, retried on a concurrent write. */
  private async write(id: string, change: (cur: CronJob) => CronJob): Promise<{ stored: CronJob; previous: CronJob }> {
    const { stored, previous, changed } = await this.tryWrite(id, change);
    if (!changed) throw new StoreUnavailableError(`Cron job ${id} was not changed.`);
    return { stored, previous };
  }

  private async tryWrite(
    id: string,
    change: (cur: CronJob) => CronJob | undefined,
  ): Promise<{ stored: CronJob; previous: CronJob; changed: boolean }> {
    return await retryOnConflict(
      async () => {
        const cur = await this.store.get(id);
        if (!cur) throw new ScheduleInputError(`Cron job ${id} was removed.`, { field: 'ref' });
        const next = change(cur);
        if (!next) return { stored: cur, previous: cur, changed: false };
        const stored = await this.store.put(next, cur.version);
        return stored ? { stored, previous: cur, changed: true } : CONFLICT;
      },
      () => {
        this.log.warn({ cronJobId: id }, 'cron job write kept conflicting; giving up');
        return new StoreUnavailableError(`Cron job ${id} is being changed concurrently; try again.`);
      },
    );
  }

  /** The typed schedule, with this service's limits. */
  private parseSchedule(text: string, tz: string, now: number): CronSchedule {
    return parseCronSchedule(text, tz, now, this.settings);
  }
}

/**
 * `--after` references resolved to job ids among `jobs`.
 * @throws ScheduleInputError (field `after`) for a reference that names no job or several
 */
function resolveAfter(specs: readonly AfterSpec[], jobs: readonly CronJob[]): CronAfter[] {
  const out = new Map<string, CronAfter>();
  for (const spec of specs) {
    let parent: CronJob;
    try {
      parent = resolveJobRef(spec.ref, jobs);
    } catch (err) {
      if (!(err instanceof ScheduleInputError)) throw err;
      const why = err instanceof UnknownJobError ? `no cron job has the id or name "${spec.ref}"` : err.message;
      throw new ScheduleInputError(`\`after\`: ${why}.`.replace(/\.\.$/, '.'), { field: 'after' });
    }
    out.set(parent.id, { job_id: parent.id, on: spec.on });
  }
  return [...out.values()];
}

/**
 * Refuse parents that would make `job` run after itself, naming the cycle in run order.
 * @throws ScheduleInputError (field `after`) naming the cycle
 */
function assertNoCycle(job: CronJob, after: readonly CronAfter[], jobs: readonly CronJob[]): void {
  const byId = new Map(jobs.map((j) => [j.id, j]));
  const cycle = findAfterCycle(
    job.id,
    after.map((a) => a.job_id),
    (id) => (id === job.id ? [] : byId.get(id)?.after?.map((a) => a.job_id)),
  );
  if (!cycle) return;
  const named = cycle.map((id) => `"${byId.get(id)?.name ?? id}"`).join(' → ');
  throw new ScheduleInputError(
    `\`after\` would close a cycle: ${named} (each runs after the one before it); a job cannot run after itself.`,
    { field: 'after' },
  );
}

/** `--repeat` counts scheduled runs: a job with no schedule of its own has none. */
function repeatWithoutSchedule(): ScheduleInputError {
  return new ScheduleInputError(
    '`repeat` counts scheduled runs; a job that runs only after other jobs has none (give it a `schedule`, or leave `repeat` out).',
    { field: 'repeat' },
  );
}
