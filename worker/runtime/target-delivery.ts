/**
 * Delivery of a loop's or heartbeat's reply, or of its notices, to its targets beyond the session
 * stream (`loopTargets`, scheduler/loop/loop-state.ts) — the same targets a cron job takes:
 *
 * - a platform target (`telegram:…`, `slack:…`, `discord:…`) goes to the platform's outbound queue,
 *   as a route's reply does (runtime/delivery.ts); the gateway reports what became of it;
 * - a webhook gets one POST of JSON through the sender cron runs use (webhook-sender.ts: the address
 *   rule again after DNS, no redirects, signed with `delivery.webhook_secret`), `Idempotency-Key`
 *   naming the occurrence; its outcome is a `delivery` event on the session stream (`sent` on a 2xx,
 *   else `failed` with why). It is not retried: the next tick is the next try, as for a cron run's.
 *
 * Outbound job ids derive from the occurrence and the target, so a retried commit never queues twice;
 * the target of the route the schedule was made from keeps the occurrence's own id.
 */
import type { LoopKind } from '../../scheduler/tick/tick-kind.ts';
import { DELIVERY_EVENT, enqueueOutbound } from '../../scheduler/delivery/outbound.ts';
import { parseDeliveryTarget, type DeliveryTarget } from '../../scheduler/delivery/delivery-target.ts';
import { parseWebhookAllow } from '../../scheduler/delivery/webhook-policy.ts';
import type { WorkerDeps } from '../worker-deps.ts';
import { outboundQueueOf } from './delivery.ts';
import { postWebhook, webhookOrigin } from './webhook-sender.ts';

/** One reply or notice of a loop or heartbeat. */
export interface TargetDelivery {
  sessionId: string;
  kind: LoopKind;
  loopId: string;
  /** What is sent: a tick's reply, the notice of a failed tick, or the notice that it paused or finished. */
  event: 'reply' | 'failure' | 'notice';
  /** The tick it comes from (1-based), when it comes from one. */
  tick?: number;
  text: string;
  occurrenceId: string;
  /** The target of the route the schedule was made from, if any: its outbound job keeps `occurrenceId` itself. */
  routeTarget?: string;
}

/**
 * Send `d` to every target (concrete targets in their text form; `local` and `origin` already resolved).
 * An empty text is not sent. Every target is tried; the first error (Redis refused to queue) is thrown after.
 */
export async function deliverToTargets(deps: WorkerDeps, targets: readonly string[], d: TargetDelivery): Promise<void> {
  const text = d.text.trim();
  if (text.length === 0) return;
  let failed: Error | undefined;
  for (const target of targets) {
    try {
      await deliverOne(deps, target, { ...d, text });
    } catch (err) {
      failed ??= err instanceof Error ? err : new Error(String(err));
    }
  }
  if (failed) throw failed;
}

async function deliverOne(deps: WorkerDeps, text: string, d: TargetDelivery): Promise<void> {
  let target: DeliveryTarget;
  try {
    target = parseDeliveryTarget(text);
  } catch {
    deps.log.warn({ sessionId: d.sessionId, kind: d.kind }, 'a stored delivery target does not parse; not sent');
    return;
  }
  if (target.kind === 'telegram' || target.kind === 'slack' || target.kind === 'discord') {
    await enqueueOutbound(outboundQueueOf(deps, target), {
      platform: target.kind,
      chatId: target.chatId,
      ...(target.threadId ? { threadId: target.threadId } : {}),
      text: d.text,
      sessionId: d.sessionId,
      occurrenceId: text === d.routeTarget ? d.occurrenceId : `${d.occurrenceId}>${text}`,
    });
    return;
  }
  if (target.kind !== 'webhook') return; // `local`: the session stream has it already
  const body = JSON.stringify({
    session_id: d.sessionId,
    kind: d.kind,
    loop_id: d.loopId,
    occurrence_id: d.occurrenceId,
    event: d.event,
    tick: d.tick ?? null,
    output: d.text,
  });
  const outcome = await postWebhook(
    target.url,
    body,
    { 'idempotency-key': d.occurrenceId },
    {
      allow: parseWebhookAllow(deps.config.delivery.webhook_allow),
      timeoutMs: deps.config.cron.webhook_timeout_seconds * 1000,
      secret: deps.config.delivery.webhook_secret,
    },
  );
  const shown = webhookOrigin(target.url);
  if (!outcome.ok)
    deps.log.warn({ sessionId: d.sessionId, kind: d.kind, target: shown, error: outcome.error }, `${d.kind} webhook delivery failed`);
  await deps.sessions.appendEvent(d.sessionId, DELIVERY_EVENT, {
    platform: 'webhook',
    target: shown,
    occurrenceId: d.occurrenceId,
    attempts: 1,
    willRetry: false,
    ...(outcome.ok
      ? { status: 'sent', httpStatus: outcome.status }
      : { status: 'failed', error: outcome.error, ...(outcome.status ? { httpStatus: outcome.status } : {}) }),
  });
}
