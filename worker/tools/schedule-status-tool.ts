/**
 * `schedule_status` (built in, always on, read-only): the session's loop,
 * heartbeat and goal as their status lines, and the cron jobs in the chat's
 * scope (made in the session or delivering to its route, the rule of the
 * `schedules` tool: `cronJobInScope`) in a compact list — never the fleet's
 * other jobs, whose prompts belong to other chats. It changes nothing.
 */
import type { CronStore } from '../../scheduler/cron/cron-store.ts';
import type { GoalService } from '../../scheduler/goal/goal-service.ts';
import type { LoopService } from '../../scheduler/loop/loop-service.ts';
import { NO_PARAMETERS, type AgentTool } from './tool.ts';
import { cronJobInScope } from './schedules-tool.ts';

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
    description: "Read this session's loop, heartbeat and goal, and this chat's cron jobs, as they are now (read-only).",
    parameters: NO_PARAMETERS,
    groups: ['schedule_status'],
    idempotent: true, // it only reads
    async call(_args, ctx) {
      // A `/v1` turn belongs to no session: it has no loop, heartbeat or goal of its own.
      const session = ctx.sessionId !== '';
      const [loop, heartbeat, goal, jobs] = await Promise.all([
        session ? sources.schedules.status(ctx.sessionId, 'loop') : NO_SESSION,
        session ? sources.schedules.status(ctx.sessionId, 'heartbeat') : NO_SESSION,
        session ? sources.goals.status(ctx.sessionId) : NO_SESSION,
        session ? sources.cron.list() : [],
      ]);
      const scope = { sessionId: ctx.sessionId, route: ctx.turn?.origin?.route };
      const mine = jobs.filter((job) => cronJobInScope(job, scope));
      const cron = mine
        .sort((a, b) => (a.next_run_at ?? Infinity) - (b.next_run_at ?? Infinity))
        .slice(0, STATUS_CRON_JOBS_MAX)
        .map(
          (j) =>
            `- ${j.name} (${j.id}): ${j.schedule.display}, ${j.state}, next ${j.next_run_at ? new Date(j.next_run_at).toISOString() : '-'}, last ${j.last_status ?? '-'}`,
        );
      return [
        `Loop: ${loop}`,
        `Heartbeat: ${heartbeat}`,
        `Goal: ${goal}`,
        `Cron jobs of this chat (${mine.length}):`,
        ...(cron.length > 0 ? cron : ['- none']),
      ].join('\n');
    },
  };
}
