/**
 * `/api/cron/jobs`: management of cron jobs over HTTP (docs/DESIGN.md §7, §8).
 *
 * The routes speak to a `CronApi`, the few operations the HTTP surface needs;
 * the product's cron service implements it (wired in gateway-process.ts). The
 * HTTP surface is not trusted to create command turns (docs/DESIGN.md §3), so `script`
 * is not accepted here: cron jobs created over HTTP are agent turns.
 */
import { Router } from 'express';
import { z } from 'zod';
import { HttpError } from './errors.ts';
import {
  CRON_JOB_STATES,
  MISFIRE_POLICIES,
  OVERLAP_POLICIES,
  type MisfirePolicy,
  type OverlapPolicy,
} from '../../scheduler/cron/cron-job.ts';
import { NOTIFY_WORDS } from '../../scheduler/economy/notify.ts';
import type { CronListFilter } from '../../scheduler/cron/cron-queries.ts';
import type { PageRequest } from '../../scheduler/store/list-page.ts';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { PLATFORM_NAMES } from '../../scheduler/delivery/platforms.ts';
import { filterOf, pageRequestOf } from './list-query.ts';

/** Fields of a new job as the HTTP surface accepts them (the CLI's `add` flags). */
export interface CronAddInput {
  /** `30m`, `every 2h`, `daily at 7am`, a cron expression, an ISO time…; may be left out when `after` is given. */
  schedule?: string;
  prompt?: string;
  name?: string;
  /** `local`, `origin`, `telegram:<chat>[:<thread>]`, a webhook URL, or a comma list. */
  deliver?: string;
  repeat?: number;
  tz?: string;
  paused?: boolean;
  misfire?: MisfirePolicy;
  /** With `misfire: all`: how far back missed runs are still run after an outage (`6h`, or seconds); default `cron.catchup_window_seconds`. */
  catchup_window?: string | number;
  overlap?: OverlapPolicy;
  /** `--notify` (docs/CONTEXT.md, "Notify"): `auto` (default), `always`, `done`, `never`; `failure` reads as `auto`. */
  notify?: (typeof NOTIFY_WORDS)[number];
  /** Jitter window: a duration (`5m`) or whole seconds; `0` for none. Must be less than the schedule's shortest gap. */
  jitter?: string | number;
  /** A declared check run before each run; an unchanged output skips the model (docs/CRON.md, "Economy"). Must be allowed from `api`. */
  watch?: string;
  /** Tokens (in + out) the job's runs may spend until it is resumed; then it pauses. The console gives the form's text (`"200000"`), read as `--max-tokens` is. */
  max_tokens?: number | string;
  /** A model declared under `agent.models`. */
  model?: string;
  /** Jobs to run after (`<job>[:ok|error|any]`, one or a list): a run after each of their runs that ends so. */
  after?: string | string[];
  /** Not supported yet (refused with 400): several `after` jobs mean a run after each. */
  after_all?: boolean;
}

/**
 * What `/api/cron` needs of the cron service. A job reference is an id or a
 * case-insensitive name. Methods throw `ScheduleInputError` for bad input and
 * for unknown or ambiguous references (answered with 400), and return the
 * affected job(s) as plain JSON-serialisable objects; `get`, `add` and `edit`
 * add `warnings` (sentences) while the job will not work as set.
 */
export interface CronApi {
  /**
   * One page of jobs in list order (by name, then id), each as its view; `next_cursor` continues it (`null`: the end).
   * A cursor this list did not give throws `ScheduleInputError` (400).
   */
  list(request: PageRequest, filter: CronListFilter): Promise<{ data: unknown[]; next_cursor: string | null }>;
  /** One job with its next fire times (`next_runs`, ISO UTC; 5 unless `nextRuns` says). Unknown references throw `UnknownJobError` (404). */
  get(ref: string, options?: { nextRuns?: number }): Promise<unknown>;
  add(input: CronAddInput): Promise<unknown>;
  /** Change fields; a new schedule or zone takes effect from now. */
  edit(ref: string, changes: CronEditInput): Promise<unknown>;
  /** Run records of one job, newest first. */
  runs(ref: string, limit: number): Promise<unknown[]>;
  pause(ref: string): Promise<unknown>;
  resume(ref: string, options: { runNow: boolean }): Promise<unknown>;
  /** Run now, outside the schedule; a job paused by its token budget only with `force` (else `ScheduleInputError`, 400). */
  runNow(ref: string, options?: { force: boolean }): Promise<unknown>;
  /**
   * Queue the occurrences the schedule had from `from` to `to` (default now; a later one clipped to now), to run
   * oldest first with trigger `backfill` (docs/CRON.md, "Backfill"). A bad window, or one over
   * `cron.max_backfill_occurrences`, throws `ScheduleInputError` (400) and queues nothing.
   */
  backfill(ref: string, input: { from: string; to?: string; force?: boolean }): Promise<unknown>;
  remove(ref: string): Promise<unknown>;
}

/** `after`: one `<job>[:ok|error|any]` or a list of them. */
const afterSchema = z.union([z.string().min(1), z.array(z.string().min(1)).max(64)]);

const addSchema = z
  .object({
    schedule: z.string().min(1).optional(),
    prompt: z.string().optional(),
    name: z.string().min(1).max(200).optional(),
    deliver: z.string().min(1).optional(),
    repeat: z.number().int().positive().optional(),
    tz: z.string().min(1).optional(),
    paused: z.boolean().optional(),
    misfire: z.enum(MISFIRE_POLICIES).optional(),
    catchup_window: z.union([z.string().min(1), z.number()]).optional(),
    overlap: z.enum(OVERLAP_POLICIES).optional(),
    notify: z.enum(NOTIFY_WORDS).optional(),
    jitter: z.union([z.string().min(1), z.number()]).optional(),
    watch: z.string().min(1).optional(),
    max_tokens: z.number().int().optional(),
    model: z.string().min(1).optional(),
    after: afterSchema.optional(),
    after_all: z.boolean().optional(),
  })
  .strict();

/**
 * Fields `PATCH /api/cron/jobs/:ref` may change (at least one). `null` removes `repeat`'s limit, the `watch`, `max_tokens`,
 * `model` or every `after` job (`after` replaces the list); `max_tokens` may also be the console form's text, as in `CronAddInput`.
 */
export type CronEditInput = Omit<z.infer<typeof editSchema>, 'max_tokens'> & { max_tokens?: number | string | null };

const editSchema = z
  .object({
    schedule: z.string().min(1).optional(),
    prompt: z.string().optional(),
    name: z.string().min(1).max(200).optional(),
    deliver: z.string().min(1).optional(),
    repeat: z.number().int().positive().nullable().optional(),
    tz: z.string().min(1).optional(),
    misfire: z.enum(MISFIRE_POLICIES).optional(),
    catchup_window: z
      .union([z.string().min(1), z.number()])
      .nullable()
      .optional(),
    overlap: z.enum(OVERLAP_POLICIES).optional(),
    notify: z.enum(NOTIFY_WORDS).optional(),
    jitter: z.union([z.string().min(1), z.number()]).optional(),
    watch: z.string().min(1).nullable().optional(),
    max_tokens: z.number().int().nullable().optional(),
    model: z.string().min(1).nullable().optional(),
    after: afterSchema.nullable().optional(),
    after_all: z.boolean().optional(),
  })
  .strict();

const runsQuerySchema = z.object({ limit: z.coerce.number().int().min(1).max(1000).default(20) });

const resumeSchema = z.object({ run_now: z.boolean().optional() }).strict();

const runSchema = z.object({ force: z.boolean().optional() }).strict();

const backfillSchema = z.object({ from: z.string().min(1), to: z.string().min(1).optional(), force: z.boolean().optional() }).strict();

/** Routes under `/api/cron`; answers 501 for every route when no cron service is wired. */
export function cronRouter(cron: CronApi | undefined, config: Pick<HermesConfig, 'api_server'>): Router {
  const router = Router();
  router.use((_req, _res, next) => {
    if (!cron) next(new HttpError(501, 'Cron jobs are not available in this gateway.', 'server_error', 'cron_unavailable'));
    else next();
  });
  // A page of jobs by name: `limit`, `cursor`, and the filters `state`, `platform`, `name` (a prefix); `all` adds completed jobs.
  router.get('/jobs', async (req, res) => {
    const all = req.query.all === '1' || req.query.all === 'true';
    const state = filterOf(req, 'state', CRON_JOB_STATES);
    const platform = filterOf(req, 'platform', PLATFORM_NAMES);
    const name = filterOf(req, 'name');
    const page = await cron!.list(pageRequestOf(req, config), {
      all,
      ...(state ? { state } : {}),
      ...(platform ? { platform } : {}),
      ...(name ? { name } : {}),
    });
    res.json({ object: 'list', data: page.data, next_cursor: page.next_cursor });
  });
  router.post('/jobs', async (req, res) => {
    res.status(201).json(await cron!.add(addSchema.parse(req.body ?? {})));
  });
  router.get('/jobs/:ref', async (req, res) => {
    res.json(await cron!.get(String(req.params.ref)));
  });
  router.patch('/jobs/:ref', async (req, res) => {
    res.json(await cron!.edit(String(req.params.ref), editSchema.parse(req.body ?? {})));
  });
  router.get('/jobs/:ref/runs', async (req, res) => {
    const { limit } = runsQuerySchema.parse(req.query);
    res.json({ object: 'list', data: await cron!.runs(String(req.params.ref), limit) });
  });
  router.post('/jobs/:ref/pause', async (req, res) => {
    res.json(await cron!.pause(String(req.params.ref)));
  });
  router.post('/jobs/:ref/resume', async (req, res) => {
    const body = resumeSchema.parse(req.body ?? {});
    res.json(await cron!.resume(String(req.params.ref), { runNow: body.run_now ?? false }));
  });
  router.post('/jobs/:ref/run', async (req, res) => {
    const body = runSchema.parse(req.body ?? {});
    res.status(202).json(await cron!.runNow(String(req.params.ref), { force: body.force ?? false }));
  });
  router.post('/jobs/:ref/backfill', async (req, res) => {
    const body = backfillSchema.parse(req.body ?? {});
    res.status(202).json(await cron!.backfill(String(req.params.ref), body));
  });
  router.delete('/jobs/:ref', async (req, res) => {
    res.json(await cron!.remove(String(req.params.ref)));
  });
  return router;
}
