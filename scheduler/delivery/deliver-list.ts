/**
 * A list of delivery targets, as cron jobs, loops and heartbeats take it (`--deliver`, `deliver` of
 * `/api`, `/loop … --deliver`): a comma list of the forms of `delivery-target.ts` (`parseDeliverList`),
 * each webhook checked against the address rule of `webhook-policy.ts` when a schedule is set with it
 * (`assertDeliverList`), and the concrete targets it stands for when a reply is sent
 * (`resolveDeliverList`: `origin` resolved to the route the schedule was made from). One rule for every
 * kind, so a target a cron job takes a loop takes too.
 */
import { formatDeliveryTarget, parseDeliveryTarget, targetOfRoute, type DeliveryTarget, type MessagingRoute } from './delivery-target.ts';
import { assertWebhookTarget, parseWebhookAllow, type WebhookAllowList } from './webhook-policy.ts';
import { ScheduleInputError } from '../errors/schedule-input-error.ts';

/** The strict address rule: no host allowed by name (`delivery.webhook_allow` empty). */
export const NO_WEBHOOK_ALLOW = parseWebhookAllow([]);

/**
 * The targets of a comma list in their text form, de-duplicated; blanks ignored. Only their form is
 * checked here: whether a webhook may be reached is `assertDeliverList`'s, with the operator's allow-list.
 * @returns `[]` for a list with no target
 * @throws ScheduleInputError (field `deliver`) naming a target that is none of the forms
 */
export function parseDeliverList(value: string): string[] {
  const out: string[] = [];
  for (const raw of value.split(',')) {
    if (raw.trim() === '') continue;
    out.push(formatDeliveryTarget(parseDeliveryTarget(raw, 'deliver')));
  }
  return [...new Set(out)];
}

/**
 * Take `--deliver <list>` out of the words of a chat command (`/loop`, `/heartbeat`): the list is the
 * one word after the flag (`--deliver origin,https://hooks.example.com/x`), parsed by `parseDeliverList`.
 * @returns the list (absent when the flag is not there) and the other words in order
 * @throws ScheduleInputError (field `deliver`) when the flag is given twice or without a list, or a target is none of the forms
 */
export function takeDeliverFlag(tokens: readonly string[]): { deliver?: string[]; rest: string[] } {
  const rest: string[] = [];
  let deliver: string[] | undefined;
  for (let i = 0; i < tokens.length; i++) {
    if (tokens[i] !== '--deliver') {
      rest.push(tokens[i]!);
      continue;
    }
    if (deliver) throw new ScheduleInputError('--deliver is given twice.', { field: 'deliver' });
    const value = tokens[++i];
    if (value === undefined || value.startsWith('--'))
      throw new ScheduleInputError('--deliver needs a target list, e.g. --deliver origin,https://hooks.example.com/x.', {
        field: 'deliver',
      });
    deliver = parseDeliverList(value);
  }
  return { ...(deliver ? { deliver } : {}), rest };
}

/**
 * The address rule of `webhook-policy.ts` over a list's webhooks, when a schedule is set with it.
 * @param allow - `delivery.webhook_allow`, parsed
 * @throws ScheduleInputError (field `deliver`) naming the first target refused and why
 */
export function assertDeliverList(targets: readonly string[], allow: WebhookAllowList): void {
  for (const text of targets) {
    const target = parseDeliveryTarget(text, 'deliver');
    if (target.kind === 'webhook') assertWebhookTarget(target.url, allow);
  }
}

/**
 * The concrete targets of a list: `origin` becomes the route's target (else `local`), duplicates go.
 * Never throws: a stored target that does not parse (they are parsed when set) is kept as it is, so
 * its delivery fails with the reason.
 */
export function resolveDeliverList(deliver: readonly string[], originRoute: MessagingRoute | undefined): string[] {
  const out = new Set<string>();
  for (const text of deliver) {
    let target: DeliveryTarget;
    try {
      target = parseDeliveryTarget(text);
    } catch {
      out.add(text);
      continue;
    }
    if (target.kind !== 'origin') out.add(formatDeliveryTarget(target));
    else out.add(formatDeliveryTarget((originRoute && targetOfRoute(originRoute)) ?? { kind: 'local' }));
  }
  return [...out];
}
