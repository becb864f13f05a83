/**
 * The stored form of a cron job record (one JSON string per job, `Keys.cronJob`).
 *
 * Compact form (what is written): the JSON of the record without the fields at
 * the value a new job has (`DEFAULTS`: a null `last_error`, zero spend, the
 * policies `once`/`skip`/`auto`, delivery `local`, a CLI origin, …), and
 * without `updated_at` while it equals `created_at`. Every other field is
 * written under its own name, so a record stays readable with `redis-cli GET`.
 * The fields the Lua scripts read with `cjson` are always written: `version`,
 * `name`, `state` and `generation` (`repeat` is omitted at its default; the
 * claim script reads it as no `--repeat` budget then).
 *
 * Reading accepts both forms: the full form of earlier versions (every field,
 * nulls included) decodes to the same record, so a stored record needs no
 * migration; it is written compact at its next change. A field an earlier
 * version did not write reads as its default (`notify` as `auto`, `spend` as
 * none, …), and the earlier `--notify` word `failure` as `auto`. The compact
 * form needs readers of this version (an earlier worker would read an omitted
 * `repeat` as a broken record), so the processes that share a Redis are
 * upgraded together (docs/OPERATIONS.md).
 *
 * Why: a stored cron job's Redis memory (docs/BENCHMARKS.md, "Cron store"): the
 * full form of a new job is ~900 bytes of JSON, the compact form ~350.
 */
import { readNotify } from '../economy/notify.ts';
import { NO_TOTALS } from '../model-spend.ts';
import type { CronJob } from './cron-job.ts';

/** Fields omitted when at these values (a new job's), and restored to them on reading (`readCronJob`: each by name). */
const DEFAULTS = {
  repeat: { times: null, completed: 0 },
  deliver: ['local'],
  script: null,
  misfire: 'once',
  catchup_window_seconds: null,
  overlap: 'skip',
  notify: 'auto',
  paused_reason: null,
  origin: { surface: 'cli' },
  watch: null,
  watch_digest: null,
  max_tokens: null,
  budget_tokens: 0,
  model: null,
  spend: NO_TOTALS,
  unchanged_runs: 0,
  next_run_at: null,
  last_run_at: null,
  last_due_at: null,
  last_status: null,
  last_error: null,
  failure_streak: 0,
} as const satisfies Partial<Record<keyof CronJob, unknown>>;

/**
 * The compact stored form of `job` (see the top of this file).
 * @returns JSON text of the job without its fields at their default
 */
export function encodeCronJob(job: CronJob): string {
  const out: Record<string, unknown> = {};
  const fields = job as unknown as Record<string, unknown>;
  // Every commit of a run writes its job: a plain loop, no entry pairs.
  for (const field of Object.keys(fields)) {
    const value = fields[field];
    if (field in DEFAULTS && sameJson(value, DEFAULTS[field as keyof typeof DEFAULTS])) continue;
    if (field === 'updated_at' && value === job.created_at) continue;
    out[field] = value;
  }
  return JSON.stringify(out);
}

/**
 * Whether two values made of JSON's kinds (plain objects, arrays, strings, numbers, booleans, null) are equal, as
 * `isDeepStrictEqual` says of them: primitives by `Object.is`, arrays item by item, objects by the same own keys
 * with equal values, in any order.
 */
function sameJson(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bs = b as unknown[];
    if (a.length !== bs.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], bs[i])) return false;
    return true;
  }
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  const ak = Object.keys(a);
  if (ak.length !== Object.keys(b).length) return false;
  for (const k of ak) {
    if (!Object.hasOwn(b, k) || !sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  }
  return true;
}

/**
 * A stored job as this version reads it, from either stored form (records are
 * read as they were written, never rewritten for it).
 * @param raw - the stored JSON text (compact or the earlier full form)
 * @throws SyntaxError when `raw` is not JSON
 */
export function readCronJob(raw: string): CronJob {
  const job = JSON.parse(raw) as { -readonly [F in keyof typeof DEFAULTS]?: unknown } & Record<string, unknown>;
  // Every read of a job list runs this per record. Each field is set by its name, in DEFAULTS' order: a record
  // given a dozen fields by computed names (a loop over the names) is turned into a dictionary of properties by
  // V8, and every later read, copy (`applyRun`, at each commit) and JSON.stringify of it is slower. The object
  // defaults are flat, so a shallow copy is the record's own.
  if (job.repeat === undefined) job.repeat = { ...DEFAULTS.repeat };
  if (job.deliver === undefined) job.deliver = [...DEFAULTS.deliver];
  if (job.script === undefined) job.script = DEFAULTS.script;
  if (job.misfire === undefined) job.misfire = DEFAULTS.misfire;
  if (job.catchup_window_seconds === undefined) job.catchup_window_seconds = DEFAULTS.catchup_window_seconds;
  if (job.overlap === undefined) job.overlap = DEFAULTS.overlap;
  if (job.notify === undefined) job.notify = DEFAULTS.notify;
  if (job.paused_reason === undefined) job.paused_reason = DEFAULTS.paused_reason;
  if (job.origin === undefined) job.origin = { ...DEFAULTS.origin };
  if (job.watch === undefined) job.watch = DEFAULTS.watch;
  if (job.watch_digest === undefined) job.watch_digest = DEFAULTS.watch_digest;
  if (job.max_tokens === undefined) job.max_tokens = DEFAULTS.max_tokens;
  if (job.budget_tokens === undefined) job.budget_tokens = DEFAULTS.budget_tokens;
  if (job.model === undefined) job.model = DEFAULTS.model;
  if (job.spend === undefined) job.spend = { ...DEFAULTS.spend };
  if (job.unchanged_runs === undefined) job.unchanged_runs = DEFAULTS.unchanged_runs;
  if (job.next_run_at === undefined) job.next_run_at = DEFAULTS.next_run_at;
  if (job.last_run_at === undefined) job.last_run_at = DEFAULTS.last_run_at;
  if (job.last_due_at === undefined) job.last_due_at = DEFAULTS.last_due_at;
  if (job.last_status === undefined) job.last_status = DEFAULTS.last_status;
  if (job.last_error === undefined) job.last_error = DEFAULTS.last_error;
  if (job.failure_streak === undefined) job.failure_streak = DEFAULTS.failure_streak;
  job.updated_at ??= job.created_at;
  job.notify = readNotify(job.notify as string | null | undefined);
  return job as unknown as CronJob;
}
