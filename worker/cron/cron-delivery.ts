/**
 * Delivery of a cron run's reply to its targets (docs/DESIGN.md §7 Delivery). The
 * `local` target is written inside the run commit (session stream of
 * `cron:<id>`, evidence: the stream id); this module sends the others after
 * the commit and records each outcome on the run:
 *
 * - `telegram:<chat>[:<thread>]` → the durable outbound queue, job id derived
 *   from the occurrence and target (a retry never queues it twice); status
 *   `queued` — the gateway then reports the outcome into the run
 *   (scheduler/cron/delivery-report.ts): `sent` with the message ids, or
 *   `failed` with the reason (a transient failure stays `queued` while retried).
 *   `slack:…` and `discord:…` targets go the same way through their platform's queue.
 * - webhook URL → HTTP POST of JSON with `Idempotency-Key: <occurrence id>`;
 *   `delivered` only on a 2xx answer (evidence: the status), else `failed`;
 *   internal addresses are refused after DNS and redirects are not followed
 *   (worker/runtime/webhook-sender.ts, scheduler/delivery/webhook-policy.ts); signed with
 *   `delivery.webhook_secret` when it is set.
 * - `origin` → the route the job was created from (a Telegram chat), else `local`.
 */
import { enqueueOutbound, outboundJobId } from '../../scheduler/delivery/outbound.ts';
import { outboundQueueOf } from '../runtime/delivery.ts';
import { isoUtc } from '../../scheduler/cron/cron-engine.ts';
import { cronSessionId, deliveryText, type CronDelivery, type CronJob, type CronRun } from '../../scheduler/cron/cron-job.ts';
import type { WorkerDeps } from '../worker-deps.ts';
import { parseWebhookAllow } from '../../scheduler/delivery/webhook-policy.ts';
import { postWebhook, webhookOrigin } from '../runtime/webhook-sender.ts';
import { parseDeliveryTarget, type DeliveryTarget } from '../../scheduler/delivery/delivery-target.ts';
import { resolveDeliverList } from '../../scheduler/delivery/deliver-list.ts';

/** The concrete targets of a job in their text form (`resolveDeliverList`: `origin` resolved, duplicates removed). */
export function resolveTargets(job: CronJob): string[] {
  return resolveDeliverList(job.deliver, job.origin.route);
}

/**
 * Send every `pending` delivery of a committed run.
 * @returns the run with each delivery's outcome (the caller stores it)
 */
export async function deliverPending(run: CronRun, job: CronJob, deps: WorkerDeps): Promise<CronRun> {
  const deliveries: CronDelivery[] = [];
  for (const d of run.deliveries) {
    if (d.status !== 'pending') {
      deliveries.push(d);
      continue;
    }
    try {
      deliveries.push(await deliverOne(d.target, run, job, deps));
    } catch (err) {
      deliveries.push({ target: d.target, status: 'failed', error: (err as Error).message });
    }
  }
  for (const d of deliveries) {
    if (d.status === 'failed')
      deps.log.warn(
        { cronJobId: run.job_id, occurrenceId: run.occurrence_id, target: redactTarget(d.target), error: d.error },
        'cron delivery failed',
      );
  }
  // Once nothing is pending, the full text is no longer needed on the record (it keeps the capped output).
  if (deliveries.some((d) => d.status === 'pending')) return { ...run, deliveries };
  const { delivery_text: _sent, ...rest } = run;
  return { ...rest, deliveries };
}

async function deliverOne(target: string, run: CronRun, job: CronJob, deps: WorkerDeps): Promise<CronDelivery> {
  const text = deliveryText(run); // the whole reply, or the failure notice
  const parsed = parseDeliveryTarget(target);
  if (parsed.kind === 'telegram' || parsed.kind === 'slack' || parsed.kind === 'discord') {
    // One outbound job per occurrence and target (outboundJobId makes it a valid BullMQ id).
    const occurrenceId = `${run.occurrence_id}>${target}`;
    await enqueueOutbound(outboundQueueOf(deps, parsed), {
      platform: parsed.kind,
      chatId: parsed.chatId,
      ...(parsed.threadId ? { threadId: parsed.threadId } : {}),
      text,
      sessionId: cronSessionId(job.id),
      occurrenceId,
      // The gateway reports what became of it into this run's delivery (`sent` / `failed`).
      report: { kind: 'cron', cronJobId: job.id, runOccurrenceId: run.occurrence_id, target },
    });
    return { target, status: 'queued', evidence: `outbound job ${outboundJobId(occurrenceId)}` };
  }
  if (parsed.kind === 'webhook') {
    const body = JSON.stringify({
      job_id: job.id,
      name: job.name,
      occurrence_id: run.occurrence_id,
      trigger: run.trigger,
      status: run.status,
      due_at: isoUtc(run.due_at),
      finished_at: run.finished_at === null ? null : isoUtc(run.finished_at),
      output: text,
      error: run.error,
    });
    // The address rule is checked again here, after DNS (webhook-sender.ts); redirects are not followed.
    const outcome = await postWebhook(
      parsed.url,
      body,
      { 'idempotency-key': run.occurrence_id },
      {
        allow: parseWebhookAllow(deps.config.delivery.webhook_allow),
        timeoutMs: deps.config.cron.webhook_timeout_seconds * 1000,
        secret: deps.config.delivery.webhook_secret,
      },
    );
    if (outcome.ok) return { target, status: 'delivered', evidence: `HTTP ${outcome.status}` };
    return { target, status: 'failed', error: outcome.error };
  }
  // `local` is written inside the run commit and `origin` resolved before it: neither is pending here.
  return { target, status: 'failed', error: `no sender for ${parsed.kind} targets` };
}

/** A target for logs: a webhook URL without path or query (they may hold secrets). */
function redactTarget(target: string): string {
  let parsed: DeliveryTarget;
  try {
    parsed = parseDeliveryTarget(target);
  } catch {
    return 'unknown target';
  }
  return parsed.kind === 'webhook' ? webhookOrigin(parsed.url) : target;
}
