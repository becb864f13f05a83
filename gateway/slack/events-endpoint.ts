/**
 * `POST /slack/events`: Slack's Events API and the `/hermes` slash command over
 * HTTP (no bearer key on this route: Slack signs its requests instead).
 *
 * 1. The signature is checked before anything is read from the body: `X-Slack-Signature`
 *    (v0, HMAC-SHA256 of `v0:<timestamp>:<raw body>` with `SLACK_SIGNING_SECRET`) and
 *    `X-Slack-Request-Timestamp` no older than 5 minutes — Bolt's `verifySlackRequest`.
 *    A bad, missing or stale signature: 401, nothing stored.
 * 2. `url_verification` is answered with its `challenge`.
 * 3. An `event_callback` or a slash command is stored in Redis (inbound.ts) and only
 *    then answered 200, so Slack retries (`X-Slack-Retry-Num`) whatever was not
 *    stored; a retry of a stored event is deduplicated by its `event_id`. Redis refusing
 *    the write: 503, and Slack retries.
 */
import { verifySlackRequest } from '@slack/bolt';
import type { Logger } from 'pino';
import { storeSlackEvent, storeSlashCommand, type SlackEventCallback, type SlackInboundDeps, type SlackSlashCommand } from './inbound.ts';

/** An HTTP answer. */
export interface EndpointAnswer {
  status: number;
  /** JSON body, or none. */
  json?: unknown;
}

/** How far a request's signed timestamp may be from now, seconds (Slack's own rule for the past: 5 minutes). */
const SIGNATURE_WINDOW_SECONDS = 300;

/**
 * Answer one request to `/slack/events`.
 * @param rawBody - the body exactly as received (the signature covers its bytes)
 * @param headers - lower-cased request headers
 */
export async function answerSlackRequest(
  rawBody: string,
  headers: Record<string, string | string[] | undefined>,
  deps: SlackInboundDeps & { signingSecret: string; log: Logger },
): Promise<EndpointAnswer> {
  const header = (name: string) => {
    const v = headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  try {
    // Bolt refuses a timestamp older than 5 minutes only; one from the future is refused here alike,
    // so a signed request that leaked cannot be replayed later, and the header must be whole seconds.
    const timestamp = header('x-slack-request-timestamp') ?? '';
    if (!/^\d{1,12}$/.test(timestamp)) throw new Error('x-slack-request-timestamp is not whole seconds');
    if (Number(timestamp) - Math.floor(Date.now() / 1000) > SIGNATURE_WINDOW_SECONDS)
      throw new Error('x-slack-request-timestamp is in the future');
    verifySlackRequest({
      signingSecret: deps.signingSecret,
      body: rawBody,
      headers: { 'x-slack-signature': header('x-slack-signature') ?? '', 'x-slack-request-timestamp': Number(timestamp) },
    });
  } catch (err) {
    deps.log.warn({ reason: (err as Error).message }, 'Slack request refused: signature not valid');
    return { status: 401, json: { error: 'invalid_signature' } };
  }
  const retryNum = header('x-slack-retry-num');
  const contentType = header('content-type') ?? '';
  if (contentType.startsWith('application/x-www-form-urlencoded')) {
    const form = Object.fromEntries(new URLSearchParams(rawBody));
    if (typeof form.payload === 'string') return { status: 200 }; // interactivity: nothing to do yet
    const answer = await storeSlashCommand(form as unknown as SlackSlashCommand, deps);
    return { status: 200, ...(answer.ephemeral ? { json: { response_type: 'ephemeral', text: answer.ephemeral } } : {}) };
  }
  let body: { type?: string; challenge?: string };
  try {
    body = JSON.parse(rawBody) as typeof body;
  } catch {
    return { status: 400, json: { error: 'invalid_json' } };
  }
  if (body.type === 'url_verification') return { status: 200, json: { challenge: body.challenge } };
  if (body.type !== 'event_callback') return { status: 200 };
  if (retryNum !== undefined) deps.log.info({ retryNum, reason: header('x-slack-retry-reason') }, 'Slack retried an event');
  await storeSlackEvent(body as SlackEventCallback, deps);
  return { status: 200 };
}
