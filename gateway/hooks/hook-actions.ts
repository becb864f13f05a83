/**
 * What a verified webhook delivery starts (docs/GATEWAY.md "Webhooks"), once per delivery id:
 *
 * - `turn`: the rendered input is queued as user input of the hook's session on surface `webhook`
 *   (gateway/web-input.ts): a `user` event, then the session's inbox, so it runs in order with the
 *   session's other input. Its reply goes where the session's replies go: the session's event stream,
 *   and the platform chat a session named like one (`telegram:<chat>`, `slack:<channel>`,
 *   `discord:<channel>`) is. Input that would read as a slash command is refused (422): a payload
 *   never changes a schedule, and webhook input never makes a command turn.
 * - `run_job`: the hook's cron job runs now, once, outside its schedule (`CronService.runNow`, what
 *   `hermes cron run` does); the operator named the job in the configuration, so it runs even when
 *   it has a `script`. The payload is not passed to the run.
 * - `wake_loop`: the next tick of the session's loop (or heartbeat, `schedule`) is due now
 *   (`LoopService.wake`): it runs as every tick does, its reply delivered where the loop's go, and a
 *   loop with `--until` has its condition judged after it, so a hook settles the condition at once
 *   against what the tick finds, not on the payload's word. A loop that is not active is refused
 *   (409, the delivery not taken). The payload is not passed to the tick.
 *
 * A delivery id is taken with `SET NX` (`Keys.hookDelivery`, `replay_window_seconds` to live) before
 * anything is queued; the same id again is refused (409). When queueing fails the mark is removed, so
 * the sender's retry is taken. A delivery taken is the hook's last (`hermes status` shows it:
 * `scheduler/hooks/hook-deliveries.ts`).
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { hookTemplate, type HermesConfig } from '../../scheduler/config/config.ts';
import type { CronService } from '../../scheduler/cron/cron-service.ts';
import type { LoopService } from '../../scheduler/loop/loop-service.ts';
import { parseDeliveryTarget, routeOfTarget, type MessagingRoute } from '../../scheduler/delivery/delivery-target.ts';
import { recordHookDelivery, type HookAccepted } from '../../scheduler/hooks/hook-deliveries.ts';
import { UnknownJobError } from '../../scheduler/errors/unknown-job-error.ts';
import { parseChatCommand } from '../../scheduler/session/chat-command.ts';
import type { SessionStore } from '../../scheduler/session/session-store.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import type { HermesQueues } from '../../scheduler/store/queues.ts';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import { HttpError } from '../http/errors.ts';
import { sendWebMessage } from '../web-input.ts';
import { renderHookTemplate } from './hook-template.ts';

/** A hook as the configuration resolved it. */
export type HookConfig = HermesConfig['hooks'][string];

/** What the hook actions use. */
export interface HookActionDeps {
  config: HermesConfig;
  redis: RedisClient;
  keys: Keys;
  queues: HermesQueues;
  sessions: SessionStore;
  cron: CronService;
  /** Loops and heartbeats (`wake_loop`). */
  schedules: LoopService;
  log: Logger;
}

/** One verified delivery to act on. */
export interface HookDelivery {
  hook: string;
  config: HookConfig;
  deliveryId: string;
  event: string;
  payload: unknown;
}

export type { HookAccepted } from '../../scheduler/hooks/hook-deliveries.ts';

/**
 * Take a delivery and start what its hook does.
 * @throws HttpError 409 for a delivery id already taken, 422 for input that reads as a slash command,
 *   409 for a `run_job` hook whose job does not exist or a `wake_loop` hook whose loop is not active; whatever the store throws (the mark removed)
 */
export async function actOnDelivery(deps: HookActionDeps, d: HookDelivery): Promise<HookAccepted> {
  const input =
    d.config.action === 'turn'
      ? renderHookTemplate(
          hookTemplate(d.config, d.event),
          d.payload,
          { hook: d.hook, event: d.event, delivery: d.deliveryId },
          {
            maxValueChars: d.config.max_value_chars,
            maxInputChars: Math.min(d.config.max_input_chars, deps.config.agent.max_prompt_chars),
          },
        )
      : '';
  if (d.config.action === 'turn' && parseChatCommand(input).kind !== 'message')
    throw new HttpError(
      422,
      `The input of hook ${d.hook} reads as a slash command; start its template with text of your own.`,
      'invalid_request_error',
      'hook_input_is_command',
    );
  const mark = deps.keys.hookDelivery(d.hook, d.deliveryId);
  const taken = await deps.redis.set(mark, 'pending', 'EX', d.config.replay_window_seconds, 'NX');
  if (taken === null) {
    deps.log.warn({ hook: d.hook, deliveryId: d.deliveryId }, 'webhook delivery refused: already taken');
    throw new HttpError(409, `Delivery ${d.deliveryId} was already taken by hook ${d.hook}.`, 'conflict_error', 'duplicate_delivery');
  }
  try {
    const accepted =
      d.config.action === 'turn'
        ? await startTurn(deps, d, input)
        : d.config.action === 'run_job'
          ? await runJob(deps, d)
          : await wakeLoop(deps, d);
    await recordHookDelivery(deps.redis, deps.keys, { at: Date.now(), delivery_id: d.deliveryId, event: d.event, accepted });
    deps.log.info({ hook: d.hook, deliveryId: d.deliveryId, event: d.event, action: d.config.action }, 'webhook delivery taken');
    return accepted;
  } catch (err) {
    await deps.redis.del(mark).catch(() => undefined);
    throw err;
  }
}

async function startTurn(deps: HookActionDeps, d: HookDelivery, input: string): Promise<HookAccepted> {
  const sessionId = d.config.session!;
  const route = routeOfSession(sessionId);
  // The same delivery id gives the same message id, so the inbox too takes it once.
  const clientId = `${d.hook}-${createHash('sha256')
    .update(d.deliveryId)
    .digest('hex')
    .slice(0, 63 - d.hook.length)}`;
  const m = await sendWebMessage(
    { redis: deps.redis, keys: deps.keys, queues: deps.queues, sessions: deps.sessions, maxChars: deps.config.agent.max_prompt_chars },
    { sessionId, text: input, clientId, surface: 'webhook', ...(route ? { route } : {}) },
  );
  return { status: 'accepted', hook: d.hook, action: 'turn', session: sessionId, message_id: m.id, occurrence_id: m.occurrenceId };
}

async function runJob(deps: HookActionDeps, d: HookDelivery): Promise<HookAccepted> {
  const ref = d.config.cron_job!;
  try {
    const r = await deps.cron.runNow(ref, { origin: { surface: 'webhook' }, trusted: true });
    return { status: 'accepted', hook: d.hook, action: 'run_job', cron_job: r.job.id, run_id: r.manualJobId };
  } catch (err) {
    if (!(err instanceof UnknownJobError)) throw err;
    throw new HttpError(409, `Hook ${d.hook} names cron job "${ref}", which does not exist.`, 'conflict_error', 'hook_job_missing');
  }
}

async function wakeLoop(deps: HookActionDeps, d: HookDelivery): Promise<HookAccepted> {
  const sessionId = d.config.session!;
  const kind = d.config.schedule ?? 'loop';
  const r = await deps.schedules.wake(sessionId, kind);
  if (!r.woken) {
    const state = r.record ? `is ${r.record.status}` : 'does not exist';
    throw new HttpError(
      409,
      `Hook ${d.hook} wakes the ${kind} of session ${sessionId}, which ${state}.`,
      'conflict_error',
      'hook_loop_not_active',
    );
  }
  return { status: 'accepted', hook: d.hook, action: 'wake_loop', session: sessionId, schedule: kind, loop_id: r.record.loopId };
}

/** The platform chat a session named like one delivers to (`telegram:<chat>` …), or none. */
function routeOfSession(sessionId: string): MessagingRoute | undefined {
  try {
    const target = parseDeliveryTarget(sessionId, 'session');
    return target.kind === 'telegram' || target.kind === 'slack' || target.kind === 'discord' ? routeOfTarget(target) : undefined;
  } catch {
    return undefined;
  }
}
