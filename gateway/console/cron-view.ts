/**
 * The fields of a cron job and of a run that the console shows, as `CronApi` returns them
 * (`cronJobView`, `cronRunView` in scheduler/cron/cron-job.ts: times as ISO strings).
 */
import type { CronDelivery, CronJobCreator } from '../../scheduler/cron/cron-job.ts';
import type { SpendWire } from '../../scheduler/model-spend.ts';

/** A job as `CronApi` shows it. */
export interface CronJobView {
  id: string;
  name: string;
  prompt: string;
  schedule: { kind: 'once' | 'interval' | 'cron'; expression: string; display: string };
  tz: string;
  /** Delivery targets in their text form. */
  deliver: string[];
  state: string;
  paused_reason: string | null;
  next_run_at: string | null;
  last_run_at: string | null;
  last_status: string | null;
  last_error: string | null;
  failure_streak: number;
  spend: SpendWire;
  /** Which runs send a notice: `failure`, `always` or `never`. */
  notify: string;
  /** What an occurrence does while the previous run is still going (`--overlap`: `OVERLAP_POLICIES`). */
  overlap: string;
  /** The jitter window and this job's fixed offset in it, whole seconds (0 without jitter). */
  jitter_seconds: number;
  jitter_offset_seconds: number;
  /** The check run before each run, the model and the token budget; `null` where unset. */
  watch: string | null;
  model: string | null;
  max_tokens: number | null;
  /** The agent made it (`schedules` tool), from this surface; `from_tool_output` after reading a tool's output. */
  created_by?: CronJobCreator | null;
  /** Only from `get`. */
  next_runs?: string[];
  /** From `get`: what will not work as set (a platform target without this gateway's bot), when anything. */
  warnings?: string[];
}

/** A run as `CronApi` shows it. */
export interface CronRunView {
  occurrence_id: string;
  trigger: string;
  status: string;
  reason: string | null;
  due_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  lateness_ms: number;
  late: boolean;
  output: string | null;
  error: string | null;
  deliveries: CronDelivery[];
  /** An `after` run: the parent run it follows (`--after`). */
  parent?: { job_id: string; occurrence_id: string; status: string };
  /** An `--after-all` run: the parent runs it follows. */
  parents?: { job_id: string; occurrence_id: string; status: string }[];
  /** The jobs this run started (`--after` it). */
  handoff?: string[];
}

/** Epoch ms of an ISO time, or `null`. */
export function ms(iso: string | null | undefined): number | null {
  return iso ? Date.parse(iso) : null;
}
