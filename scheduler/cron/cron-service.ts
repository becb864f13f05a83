/**
 * Managing cron jobs: the one service the `hermes cron` CLI and the gateway's
 * `/api` both call, so every rule lives here once. The pure functions of
 * cron-job.ts decide, the store persists.
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
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { StoreUnavailableError } from '../errors/store-unavailable-error.ts';
import type { Origin } from '../loop/loop-state.ts';
import { assertTimeZone, defaultTimeZone, type CronSchedule } from './cron-engine.ts';
import {
  createCronJob, cronToolSurfaces, firstDue, parseDeliver, pauseCronJob, pausedByStreak, resumeCronJob,
  type CronEconomy, type CronJob, type CronJobCreator, type CronRun, type MisfirePolicy, type NotifyPolicy, type OverlapPolicy,
  MISFIRE_POLICIES, NOTIFY_POLICIES, OVERLAP_POLICIES,
} from './cron-job.ts';
import { checkCronEconomy, economyError, parseCronEconomy, type CronEconomyInput, type EconomyChecker } from './cron-economy.ts';
import { CronStore } from './cron-store.ts';
import { resolveJobRef } from './job-ref.ts';
import { parseSchedule } from './schedule-grammar.ts';
import { jitterSecondsOf, parseJitter, withJitter } from './jitter.ts';
import type { WebhookAllowList } from '../delivery/webhook-policy.ts';
import { countAliveWorkers } from '../worker-liveness.ts';
import { CONFLICT, retryOnConflict } from '../store/optimistic-retry.ts';

/** Settings of the service, resolved once from the configuration. */
export interface CronServiceSettings {
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
  /** `delivery.webhook_allow`, parsed; default empty (no internal webhook target is accepted). */
  webhookAllow?: WebhookAllowList;
  /**
   * Checks `--watch` and `--model` against the operator's config for a surface
   * (`checkEconomy`, `../loop/economy-check.ts`); absent = not checked (tests that pin settings).
   */
  checkEconomy?: EconomyChecker;
}

/** What `add` takes; strings as a user typed them (CLI flags or `/api` JSON). */
export interface CronJobInput {
  schedule: string;
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
  overlap?: string;
  notify?: string;
  /** New jitter window; `0` removes it. Re-arms the job from now. */
  jitter?: string | number;
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

/** Fleet health for `hermes cron status`. */
export interface CronStatus {
  workersAlive: number;
  jobs: { total: number; scheduled: number; paused: number; completed: number; error: number };
  /** The next few runs, soonest first. */
  upcoming: Array<{ id: string; name: string; tz: string; next_run_at: number }>;
  /** Lateness of the recent runs that started. */
  lateness: { runs: number; averageMs: number; maxMs: number; late: number };
  /** Jobs with failed runs in a row; `paused_reason` when the streak paused the job. */
  failing: Array<{ id: string; name: string; failure_streak: number; last_error: string | null; state: CronJob['state']; paused_reason: string | null }>;
  /** Delivery outcomes of the recent runs, by status (`sent`, `delivered`, `queued`, `failed`, …). */
  deliveries: Record<string, number>;
  /** Failed deliveries of the recent runs, newest first (at most 5). */
  failedDeliveries: Array<{ id: string; name: string; occurrence_id: string; target: string; error: string | null }>;
}

/** One `doctor` finding. */
export interface CronFinding {
  jobId: string | null;
  message: string;
}

/** A delivery still queued for the gateway this long after its run is a `doctor` finding. */
export const DELIVERY_STUCK_MS = 10 * 60_000;

export class CronService {
  constructor(
    readonly store: CronStore,
    private readonly settings: CronServiceSettings,
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
    const tz = defaultTimeZone(input.tz, this.settings.timezone);
    const id = randomBytes(6).toString('hex');
    const jitterSeconds = input.jitter === undefined ? 0 : parseJitter(input.jitter);
    const schedule = withJitter(this.parse(input.schedule, tz, now), id, jitterSeconds);
    const script = this.script(input.script, caller);
    const prompt = this.prompt(input.prompt ?? '', script);
    const economy = this.economy({ watch: input.watch, max_tokens: input.max_tokens, model: input.model }, { clearable: false }, caller);
    const alsoFrom = [...new Set((caller.alsoFrom ?? []).filter((s) => s !== 'cli' && s !== caller.origin.surface))];
    checkCronEconomy({ script, economy }, {
      changed: economy, surfacesGrew: false, checker: this.settings.checkEconomy, asker: caller.origin.surface,
      surfaces: [caller.origin.surface, ...cronToolSurfaces({ origin: caller.origin, edited_from: alsoFrom })],
    });
    const job = createCronJob({
      id,
      name: input.name === undefined ? null : this.name(input.name),
      prompt,
      schedule,
      tz,
      repeat: parseRepeat(input.repeat),
      deliver: parseDeliver(input.deliver, this.settings.webhookAllow),
      script,
      misfire: parseMisfire(input.misfire),
      overlap: parseOverlap(input.overlap),
      notify: parseNotify(input.notify),
      economy,
      paused: input.paused === true,
      origin: caller.origin,
      now,
      createdBy: caller.createdBy,
    });
    if (alsoFrom.length > 0) job.edited_from = alsoFrom;
    job.name = await this.uniqueName(job.name, input.name !== undefined);
    const stored = await this.store.put(job, 'absent');
    if (!stored) throw new StoreUnavailableError(`Cron job id ${job.id} already exists; try again.`);
    await this.store.arm(stored, now);
    this.log.info({ cronJobId: stored.id, kind: schedule.kind, tz, state: stored.state }, 'cron job added');
    return stored;
  }

  /**
   * Change fields of a job. A new schedule or zone re-arms it from now (no
   * catch-up of the old schedule's occurrences).
   * @throws ScheduleInputError for a bad reference or field (nothing is written)
   */
  async edit(ref: string, changes: CronJobChanges, caller: CronCaller): Promise<CronJob> {
    if (Object.values(changes).every((v) => v === undefined)) {
      throw new ScheduleInputError('Nothing to change: give at least one of `schedule`, `prompt`, `name`, `deliver`, `repeat`, `tz`, `script`, `misfire`, `overlap`, `notify`, `jitter`, `watch`, `max_tokens`, `model`.');
    }
    const current = await this.resolveRef(ref);
    const now = this.clock();
    // Validate everything before the first write.
    const tz = changes.tz !== undefined ? assertTimeZone(changes.tz) : current.tz;
    const rearm = changes.schedule !== undefined || changes.tz !== undefined || changes.jitter !== undefined;
    let schedule: CronSchedule = current.schedule;
    if (changes.schedule !== undefined) schedule = this.parse(changes.schedule, tz, now);
    else if (changes.tz !== undefined && schedule.kind === 'cron') schedule = this.parse(schedule.expression, tz, now);
    // The jitter stays unless changed, and must fit the (new) schedule.
    const jitterSeconds = changes.jitter !== undefined ? parseJitter(changes.jitter) : jitterSecondsOf(current.schedule);
    schedule = withJitter(schedule, current.id, jitterSeconds);
    const script = changes.script === undefined ? current.script : changes.script === null ? null : this.script(changes.script, caller);
    const prompt = changes.prompt !== undefined ? this.prompt(changes.prompt, script) : this.prompt(current.prompt, script);
    // Economy (docs/CRON.md, "Economy"): checked as the job will be, for the surfaces its runs will answer to.
    const economyChanges = this.economy({ watch: changes.watch, max_tokens: changes.max_tokens, model: changes.model }, { clearable: true }, caller);
    const economy: CronEconomy = {
      watch: economyChanges.watch !== undefined ? economyChanges.watch : current.watch ?? null,
      max_tokens: economyChanges.max_tokens !== undefined ? economyChanges.max_tokens : current.max_tokens ?? null,
      model: economyChanges.model !== undefined ? economyChanges.model : current.model ?? null,
    };
    const alsoFrom = (caller.alsoFrom ?? []).filter((s) => s !== 'cli');
    const editedFromAfter = (from: CronJob['edited_from']) => [...new Set([
      ...(caller.origin.surface !== 'cli' ? [...(from ?? []), caller.origin.surface] : changes.prompt !== undefined ? [] : from ?? []),
      ...alsoFrom,
    ])];
    const surfacesBefore = cronToolSurfaces(current);
    const surfacesAfter = cronToolSurfaces({ origin: current.origin, edited_from: editedFromAfter(current.edited_from) });
    checkCronEconomy({ script, economy }, {
      changed: economyChanges, surfacesGrew: surfacesAfter.some((s) => !surfacesBefore.includes(s)),
      checker: this.settings.checkEconomy, asker: caller.origin.surface, surfaces: [caller.origin.surface, ...surfacesAfter],
    });
    const fields = {
      name: changes.name !== undefined ? await this.uniqueName(this.name(changes.name), true, current.id) : current.name,
      deliver: changes.deliver !== undefined ? parseDeliver(changes.deliver, this.settings.webhookAllow) : current.deliver,
      repeatTimes: changes.repeat !== undefined ? (changes.repeat === null ? null : parseRepeat(changes.repeat)) : current.repeat.times,
      misfire: changes.misfire !== undefined ? parseMisfire(changes.misfire) : current.misfire,
      overlap: changes.overlap !== undefined ? parseOverlap(changes.overlap) : current.overlap,
      notify: changes.notify !== undefined ? parseNotify(changes.notify) : current.notify ?? 'failure',
    };
    const { stored, previous } = await this.write(current.id, (cur) => {
      const next: CronJob = {
        ...cur, prompt, script, schedule, tz, name: fields.name, deliver: fields.deliver, misfire: fields.misfire, overlap: fields.overlap, notify: fields.notify,
        repeat: { times: fields.repeatTimes, completed: cur.repeat.completed }, updated_at: now,
        watch: economy.watch, model: economy.model, max_tokens: economy.max_tokens,
      };
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
    this.log.info({ cronJobId: stored.id, rearmed: rearm }, 'cron job edited');
    return stored;
  }

  /**
   * Pause: once this returns no run of the job starts until it is resumed.
   * @returns the job and whether it changed (a job that is not scheduled stays as it is)
   */
  async pause(ref: string): Promise<{ job: CronJob; changed: boolean }> {
    const current = await this.resolveRef(ref);
    const now = this.clock();
    const { stored, changed } = await this.tryWrite(current.id, (cur) => pauseCronJob(cur, now));
    await this.store.disarm(current);
    if (changed) this.log.info({ cronJobId: stored.id }, 'cron job paused');
    return { job: stored, changed };
  }

  /**
   * Resume a paused job at its next occurrence after now (never a catch-up);
   * with `runNow` also run it once right away.
   * @throws ScheduleInputError for a one-shot whose time passed while paused
   */
  async resume(ref: string, options: { runNow?: boolean } = {}): Promise<{ job: CronJob; changed: boolean; manualJobId?: string }> {
    const current = await this.resolveRef(ref);
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
   * schedule and `next_run_at` are not changed (field report F12).
   * @returns the job and the occurrence's BullMQ job id
   */
  async runNow(ref: string): Promise<{ job: CronJob; manualJobId: string; dueAt: number }> {
    const job = await this.resolveRef(ref);
    const now = this.clock();
    const manualJobId = await this.store.enqueueManual(job, now);
    this.log.info({ cronJobId: job.id, manualJobId }, 'cron job run requested');
    return { job, manualJobId, dueAt: now };
  }

  /** Remove the job, its history and its BullMQ jobs; no run starts after this returns. @returns the removed job */
  async remove(ref: string): Promise<CronJob> {
    const job = await this.resolveRef(ref);
    await this.store.delete(job.id);
    await this.store.disarm(job);
    this.log.info({ cronJobId: job.id }, 'cron job removed');
    return job;
  }

  /**
   * Jobs sorted by next run (then creation). Without `all`, completed jobs are left out.
   */
  async list(options: { all?: boolean } = {}): Promise<CronJob[]> {
    const jobs = await this.store.list();
    return jobs
      .filter((j) => options.all || j.state !== 'completed')
      .sort((a, b) => (a.next_run_at ?? Infinity) - (b.next_run_at ?? Infinity) || a.created_at - b.created_at);
  }

  /** The job a reference names. @throws ScheduleInputError when none or several match */
  async get(ref: string): Promise<CronJob> {
    return await this.resolveRef(ref);
  }

  /**
   * Run records, newest first: of one job, or of all jobs without `ref`.
   * @throws ScheduleInputError for a bad reference or limit
   */
  async runs(ref: string | undefined, limit = 20): Promise<CronRun[]> {
    if (!Number.isInteger(limit) || limit < 1) throw new ScheduleInputError(`\`limit\` must be a positive whole number, got ${limit}.`, { field: 'limit' });
    if (ref === undefined) return await this.store.recentRuns(limit);
    const job = await this.resolveRef(ref);
    return await this.store.runs(job.id, limit);
  }

  /** Resolve an id or case-insensitive name. @throws ScheduleInputError when none or several match */
  async resolveRef(ref: string): Promise<CronJob> {
    if (/^[0-9a-f]{12}$/.test(ref.trim())) {
      const byId = await this.store.get(ref.trim());
      if (byId) return byId;
    }
    return resolveJobRef(ref, await this.store.list());
  }

  /** Fleet health: workers alive, job counts, the next runs, lateness of recent runs, failing jobs. */
  async status(options: { upcoming?: number } = {}): Promise<CronStatus> {
    const now = this.clock();
    const [jobs, workersAlive, recent] = await Promise.all([
      this.store.list(),
      countAliveWorkers(this.store.redis, this.store.keys.workers, now),
      this.store.recentRuns(100),
    ]);
    const count = (s: CronJob['state']) => jobs.filter((j) => j.state === s).length;
    const started = recent.filter((r) => r.started_at !== null);
    const names = new Map(jobs.map((j) => [j.id, j.name]));
    const deliveries: Record<string, number> = {};
    const failedDeliveries: CronStatus['failedDeliveries'] = [];
    for (const r of recent) {
      for (const d of r.deliveries) {
        deliveries[d.status] = (deliveries[d.status] ?? 0) + 1;
        if (d.status === 'failed' && failedDeliveries.length < 5) {
          failedDeliveries.push({ id: r.job_id, name: names.get(r.job_id) ?? r.job_id, occurrence_id: r.occurrence_id, target: d.target, error: d.error ?? null });
        }
      }
    }
    const lateness = started.map((r) => r.lateness_ms);
    return {
      workersAlive,
      jobs: { total: jobs.length, scheduled: count('scheduled'), paused: count('paused'), completed: count('completed'), error: count('error') },
      upcoming: jobs
        .filter((j) => j.state === 'scheduled' && j.next_run_at !== null)
        .sort((a, b) => a.next_run_at! - b.next_run_at!)
        .slice(0, options.upcoming ?? 5)
        .map((j) => ({ id: j.id, name: j.name, tz: j.tz, next_run_at: j.next_run_at! })),
      lateness: {
        runs: started.length,
        averageMs: lateness.length ? Math.round(lateness.reduce((a, b) => a + b, 0) / lateness.length) : 0,
        maxMs: lateness.length ? Math.max(...lateness) : 0,
        late: started.filter((r) => r.late).length,
      },
      failing: jobs
        .filter((j) => j.failure_streak > 0)
        .sort((a, b) => b.failure_streak - a.failure_streak)
        .map((j) => ({
          id: j.id, name: j.name, failure_streak: j.failure_streak, last_error: j.last_error, state: j.state, paused_reason: j.paused_reason ?? null,
        })),
      deliveries,
      failedDeliveries,
    };
  }

  /**
   * Read-only checks (`hermes cron doctor`): Redis eviction policy, workers
   * alive, every scheduled job armed and firing when its record says, zones
   * valid, repeated failures, scheduled jobs whose next run is long past.
   * @returns the findings; empty when all is well
   */
  async doctor(): Promise<CronFinding[]> {
    return await this.doctorChecks();
  }

  /**
   * Findings about the deliveries of a job's latest run: a target that failed
   * (with the reason), or one still queued for the gateway after
   * `DELIVERY_STUCK_MS` (no gateway running, or a chat that keeps failing).
   */
  private async deliveryFindings(job: CronJob, now: number): Promise<CronFinding[]> {
    const [last] = await this.store.runs(job.id, 1);
    if (!last) return [];
    const out: CronFinding[] = [];
    for (const d of last.deliveries) {
      if (d.status === 'failed') {
        out.push({ jobId: job.id, message: `last delivery to ${d.target} failed (not retried): ${d.error ?? 'unknown error'}` });
      } else if (d.status === 'queued' && (last.finished_at ?? last.due_at) < now - DELIVERY_STUCK_MS) {
        const why = d.error ? `last attempt: ${d.error}, ${d.will_retry ? 'retrying' : 'not retried'}` : 'is a gateway running?';
        out.push({ jobId: job.id, message: `last delivery to ${d.target} is still queued after ${Math.round((now - (last.finished_at ?? last.due_at)) / 60_000)} min (${why}).` });
      }
    }
    return out;
  }

  private async doctorChecks(): Promise<CronFinding[]> {
    const now = this.clock();
    const findings: CronFinding[] = [];
    try {
      const res = (await this.store.redis.config('GET', 'maxmemory-policy')) as string[];
      if (res[1] && res[1] !== 'noeviction') {
        findings.push({ jobId: null, message: `Redis maxmemory-policy is ${res[1]}: jobs may be evicted under memory pressure; set it to noeviction.` });
      }
    } catch {
      // CONFIG is disabled on some managed Redis services; not a finding.
    }
    const jobs = await this.store.list();
    const alive = await countAliveWorkers(this.store.redis, this.store.keys.workers, now);
    if (alive === 0 && jobs.some((j) => j.state === 'scheduled')) {
      findings.push({ jobId: null, message: 'No worker is alive: scheduled jobs will not run. Start one with `hermes worker` or `hermes up`.' });
    }
    for (const job of jobs) {
      try {
        assertTimeZone(job.tz);
      } catch {
        findings.push({ jobId: job.id, message: `time zone ${job.tz} is unknown to this runtime.` });
        continue;
      }
      if (job.state === 'paused' && job.paused_reason) {
        findings.push({
          jobId: job.id,
          message: pausedByStreak(job)
            ? `paused after ${job.paused_reason}; \`hermes cron resume ${job.id}\` continues.`
            : `paused: ${job.paused_reason}; \`hermes cron resume ${job.id}\` continues${job.max_tokens ? ' with a fresh token allowance' : ''}.`,
        });
      }
      if (job.state !== 'scheduled') continue;
      if (job.schedule.kind === 'once') {
        if (job.next_run_at !== null && !(await this.store.hasOnceJob(job.id, job.next_run_at))) {
          findings.push({ jobId: job.id, message: 'scheduled one-shot has no queued job; a worker start (reconcile) re-arms it.' });
        }
      } else {
        const next = await this.store.schedulerNext(job.id);
        if (next === undefined) {
          findings.push({ jobId: job.id, message: 'scheduled job has no job scheduler; a worker start (reconcile) re-arms it.' });
        } else if (job.next_run_at !== null && job.next_run_at > now && next !== job.next_run_at) {
          // A record whose next run is in the past is mid-run (the scheduler already moved on).
          findings.push({ jobId: job.id, message: `job scheduler fires at ${new Date(next).toISOString()} but the record says ${new Date(job.next_run_at).toISOString()}.` });
        }
      }
      if (job.next_run_at !== null && job.next_run_at < now - 10 * 60_000) {
        findings.push({ jobId: job.id, message: `next run ${new Date(job.next_run_at).toISOString()} is more than 10 minutes overdue.` });
      }
      findings.push(...(await this.deliveryFindings(job, now)));
      // A streak is a finding from its first failure: the job still runs, and will pause if it goes on.
      if (job.failure_streak > 0) {
        const runs = job.failure_streak === 1 ? 'its last run failed' : `failed ${job.failure_streak} runs in a row`;
        findings.push({ jobId: job.id, message: `in a failure streak: ${runs}; last error: ${job.last_error ?? 'unknown'} (\`hermes cron logs ${job.id}\` shows the runs).` });
      }
    }
    return findings;
  }

  private parse(text: string, tz: string, now: number): CronSchedule {
    return parseSchedule(text, { tz, now, minIntervalSeconds: this.settings.minIntervalSeconds, maxChars: this.settings.maxScheduleChars });
  }

  private script(script: string | undefined, caller: CronCaller): string | null {
    if (script === undefined) return null;
    if (!caller.trusted) {
      throw new ScheduleInputError('Jobs with a `script` (command turns) can only be created from the CLI or the config file.', { field: 'script' });
    }
    if (script.trim() === '') throw new ScheduleInputError('`script` needs a command.', { field: 'script' });
    return script;
  }

  /** Parse economy fields, with errors in the asking surface's words. */
  private economy(input: CronEconomyInput, options: { clearable: boolean }, caller: CronCaller): CronEconomy {
    try {
      return parseCronEconomy(input, options);
    } catch (err) {
      throw economyError(err, caller.origin.surface);
    }
  }

  private prompt(prompt: string, script: string | null): string {
    const p = prompt.trim();
    if (p === '' && script === null) throw new ScheduleInputError('A cron job needs a prompt (or `script`).', { field: 'prompt' });
    if (p.length > this.settings.maxPromptChars) {
      throw new ScheduleInputError(`The prompt has ${p.length} characters; the limit is ${this.settings.maxPromptChars} (agent.max_prompt_chars).`, { field: 'prompt' });
    }
    return p;
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
    const others = (await this.store.list()).filter((j) => j.id !== selfId);
    const taken = (n: string) => others.find((j) => j.name.toLowerCase() === n.toLowerCase() || j.id === n);
    const holder = taken(name);
    if (!holder) return name;
    if (explicit) {
      if (holder.id === name && holder.name.toLowerCase() !== name.toLowerCase()) {
        throw new ScheduleInputError(`"${name}" is the id of the cron job "${holder.name}"; a name may not be another job's id (references would be ambiguous). Choose another \`name\`.`, { field: 'name' });
      }
      throw new ScheduleInputError(`A cron job named "${holder.name}" already exists (${holder.id}); choose another \`name\` or edit that job.`, { field: 'name' });
    }
    for (let i = 2; ; i++) if (!taken(`${name} (${i})`)) return `${name} (${i})`;
  }

  private name(name: string): string {
    const n = name.trim().replace(/\s+/g, ' ');
    if (n === '') throw new ScheduleInputError('`name` must not be empty.', { field: 'name' });
    if (n.length > 80) throw new ScheduleInputError(`\`name\` has ${n.length} characters; the limit is 80.`, { field: 'name' });
    return n;
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
    return await retryOnConflict(async () => {
      const cur = await this.store.get(id);
      if (!cur) throw new ScheduleInputError(`Cron job ${id} was removed.`, { field: 'ref' });
      const next = change(cur);
      if (!next) return { stored: cur, previous: cur, changed: false };
      const stored = await this.store.put(next, cur.version);
      return stored ? { stored, previous: cur, changed: true } : CONFLICT;
    }, () => {
      this.log.warn({ cronJobId: id }, 'cron job write kept conflicting; giving up');
      return new StoreUnavailableError(`Cron job ${id} is being changed concurrently; try again.`);
    });
  }
}

function parseRepeat(value: number | string | undefined | null): number | null {
  if (value === undefined || value === null) return null;
  const n = typeof value === 'number' ? value : /^\s*\d+\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isInteger(n) || n < 1) {
    throw new ScheduleInputError(`\`repeat\` must be a positive whole number, got "${value}".`, { field: 'repeat' });
  }
  return n;
}

function parseMisfire(value: string | undefined): MisfirePolicy {
  if (value === undefined) return 'once';
  if (isOneOf(MISFIRE_POLICIES, value)) return value;
  throw new ScheduleInputError(`\`misfire\` must be skip or once, got "${value}".`, { field: 'misfire' });
}

function parseNotify(value: string | undefined): NotifyPolicy {
  if (value === undefined) return 'failure';
  if (isOneOf(NOTIFY_POLICIES, value)) return value;
  throw new ScheduleInputError(`\`notify\` must be always, failure or never, got "${value}".`, { field: 'notify' });
}

function parseOverlap(value: string | undefined): OverlapPolicy {
  if (value === undefined) return 'skip';
  if (isOneOf(OVERLAP_POLICIES, value)) return value;
  throw new ScheduleInputError(`\`overlap\` must be skip, queue or allow, got "${value}".`, { field: 'overlap' });
}

/** Whether `value` is one of `list` (narrows it to the list's union). */
function isOneOf<T extends string>(list: readonly T[], value: string): value is T {
  return (list as readonly string[]).includes(value);
}
