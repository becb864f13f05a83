/**
 * `schedule_status` (built in, always on, read-only): the session's loop,
 * heartbeat and goal as their status lines, and the cron jobs (which live
 * outside sessions) in a compact list. It changes nothing.
 */
import type { CronStore } from '../../scheduler/cron/cron-store.ts';
import type { GoalService } from '../../scheduler/goal/goal-service.ts';
import type { LoopService } from '../../scheduler/loop/loop-service.ts';
import { NO_PARAMETERS, type AgentTool } from './tool.ts';

/** Cron jobs listed at most. */
export const STATUS_CRON_JOBS_MAX = 20;

/** The stores `schedule_status` reads. */
export interface ScheduleStatusSources {
  schedules: LoopService;
  goals: GoalService;
  cron: CronStore;
}

const NO_SESSION = 'none (this turn belongs to no session)';

export function scheduleStatusTool(sources: ScheduleStatusSources): AgentTool {
  return {
    name: 'schedule_status',
    description: "Read this session's loop, heartbeat and goal, and the cron jobs, as they are now (read-only).",
    parameters: NO_PARAMETERS,
    groups: ['schedule_status'],
    async call(_args, ctx) {
      // A `/v1` turn belongs to no session: it has no loop, heartbeat or goal of its own.
      const session = ctx.sessionId !== '';
      const [loop, heartbeat, goal, jobs] = await Promise.all([
        session ? sources.schedules.status(ctx.sessionId, 'loop') : NO_SESSION,
        session ? sources.schedules.status(ctx.sessionId, 'heartbeat') : NO_SESSION,
        session ? sources.goals.status(ctx.sessionId) : NO_SESSION,
        sources.cron.list(),
      ]);
      const cron = jobs
        .sort((a, b) => (a.next_run_at ?? Infinity) - (b.next_run_at ?? Infinity))
        .slice(0, STATUS_CRON_JOBS_MAX)
        .map((j) => `- ${j.name} (${j.id}): ${j.schedule.display}, ${j.state}, next ${j.next_run_at ? new Date(j.next_run_at).toISOString() : '-'}, last ${j.last_status ?? '-'}`);
      return [
        `Loop: ${loop}`,
        `Heartbeat: ${heartbeat}`,
        `Goal: ${goal}`,
        `Cron jobs (${jobs.length}):`,
        ...(cron.length > 0 ? cron : ['- none']),
      ].join('\n');
    },
  };
}
