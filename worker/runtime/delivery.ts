/**
 * Delivery of a committed reply beyond the session stream: to the session's
 * messaging route through the platform's outbound queue. The outbound job id
 * is derived from the occurrence, so a retried commit never queues twice.
 */
import type { Origin } from '../../scheduler/session/origin.ts';
import type { Queue } from 'bullmq';
import { enqueueOutbound, type OutboundData } from '../../scheduler/delivery/outbound.ts';
import { targetOfRoute, type PlatformTarget } from '../../scheduler/delivery/delivery-target.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/** The outbound queue of a platform target's platform. */
export function outboundQueueOf(
  deps: Pick<WorkerDeps, 'outboundTelegram' | 'outboundSlack' | 'outboundDiscord'>,
  target: PlatformTarget,
): Queue<OutboundData> {
  switch (target.kind) {
    case 'telegram':
      return deps.outboundTelegram as unknown as Queue<OutboundData>;
    case 'slack':
      return deps.outboundSlack;
    case 'discord':
      return deps.outboundDiscord;
  }
}

/**
 * Queue `text` for the origin's route, if it has one; an empty text is not sent. Whether a reply goes
 * out at all is its path's decision (a quiet reply: `scheduler/economy/silent-reply.ts`).
 */
export async function deliverToRoute(
  deps: WorkerDeps,
  input: { sessionId: string; origin: Origin; text: string; occurrenceId: string },
): Promise<void> {
  const route = input.origin.route;
  const text = input.text.trim();
  if (!route || text.length === 0) return;
  const target = targetOfRoute(route);
  if (target) {
    await enqueueOutbound(outboundQueueOf(deps, target), {
      platform: target.kind,
      chatId: target.chatId,
      ...(target.threadId ? { threadId: target.threadId } : {}),
      text,
      sessionId: input.sessionId,
      occurrenceId: input.occurrenceId,
    });
  } else {
    deps.log.warn(
      { sessionId: input.sessionId, platform: route.platform },
      'no outbound queue for platform; reply kept in the session stream only',
    );
  }
}
