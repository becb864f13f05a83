/**
 * `POST /hooks/<name>`: signed webhooks the operator declared (`hooks.<name>`; docs/GATEWAY.md
 * "Webhooks"). No bearer key and no browser guard: the signature is the route's key. Each step
 * refuses before the next reads more, and nothing is stored before the last:
 *
 * 1. an unknown hook: 404, the body not read;
 * 2. a sender outside `allow_from`: 403, the body not read;
 * 3. Redis away: 503 with Retry-After (the sender retries);
 * 4. a body over `max_body_bytes`: 413 (a declared length over it is refused unread);
 * 5. a bad or missing signature, a stale timestamp: 401 (gateway/hooks/hook-signature.ts);
 * 6. a body that is not JSON (or GitHub's form `payload=`): 400;
 * 7. GitHub's `ping`, an event not in `events`, a payload not matching `match`: 202 `ignored`, nothing stored;
 * 8. the delivery taken once (gateway/hooks/hook-actions.ts): 202 with what it started; a delivery id
 *    already taken: 409.
 */
import express, { Router } from 'express';
import ipaddr from 'ipaddr.js';
import type { Logger } from 'pino';
import { actOnDelivery, type HookActionDeps, type HookConfig } from '../hooks/hook-actions.ts';
import { headerValue, verifyHookSignature } from '../hooks/hook-signature.ts';
import { payloadMatches } from '../hooks/hook-template.ts';
import { ConfigError } from '../../scheduler/errors/config-error.ts';
import { HttpError } from './errors.ts';

/** What the `/hooks` router uses. */
export interface HookRouteDeps extends HookActionDeps {
  /** The 503 gate while Redis is away (server.ts). */
  storeGate: express.RequestHandler;
  /** Epoch ms source (tests may pin it). */
  clock?: () => number;
  log: Logger;
}

/**
 * The `/hooks` router over the hooks of `deps.config`.
 * @throws ConfigError for a hook whose secret was not resolved (`secret_env` unset, `secret_file` unreadable, too
 *   short: `loadConfig`'s `secret_problem`), so a gateway does not start with a hook that cannot check signatures
 */
export function hooksRouter(deps: HookRouteDeps): Router {
  const router = Router();
  const hooks = deps.config.hooks;
  for (const [name, hook] of Object.entries(hooks)) {
    if (hook.secret === undefined)
      throw new ConfigError(hook.secret_problem ?? `Hook ${name} has no secret: set hooks.${name}.secret_env or secret_file.`, {
        key: `hooks.${name}`,
      });
  }
  const clock = deps.clock ?? Date.now;
  const bodies = new Map<string, express.RequestHandler>(
    Object.entries(hooks).map(([name, h]) => [name, express.raw({ type: () => true, limit: h.max_body_bytes })]),
  );
  const hookOf = (req: express.Request, res: express.Response): [string, HookConfig] => {
    const name = String(req.params.name);
    if (!Object.hasOwn(hooks, name)) {
      // The body is not read: close the connection rather than drain it.
      res.set('Connection', 'close');
      throw new HttpError(404, `No hook named ${name}.`, 'not_found_error', 'unknown_hook');
    }
    return [name, hooks[name]!];
  };

  router.post(
    '/:name',
    (req, res, next) => {
      const [name, hook] = hookOf(req, res);
      if (!senderAllowed(req.socket.remoteAddress, hook.allow_from)) {
        deps.log.warn({ hook: name, from: req.socket.remoteAddress }, 'webhook refused: sender not in allow_from');
        res.set('Connection', 'close');
        throw new HttpError(403, `This address may not call hook ${name}.`, 'authentication_error', 'sender_not_allowed');
      }
      const declared = Number(req.get('content-length'));
      if (Number.isFinite(declared) && declared > hook.max_body_bytes) {
        res.set('Connection', 'close');
        throw new HttpError(413, `The body is over ${hook.max_body_bytes} bytes.`, 'invalid_request_error', 'body_too_large');
      }
      next();
    },
    deps.storeGate,
    (req, res, next) => bodies.get(String(req.params.name))!(req, res, next),
    async (req, res) => {
      const [name, hook] = hookOf(req, res);
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const signed = verifyHookSignature(hook.signature, hook.secret!, body, req.headers, clock());
      if (!signed.ok) {
        deps.log.warn({ hook: name, reason: signed.reason }, 'webhook refused: signature not valid');
        throw new HttpError(401, `The request to hook ${name} is not signed as it must be.`, 'authentication_error', 'invalid_signature');
      }
      if (hook.signature === 'github' && signed.event === 'ping') {
        res.status(202).json({ status: 'ignored', hook: name, reason: 'ping' });
        return;
      }
      const payload = parsePayload(body, headerValue(req.headers, 'content-type') ?? '');
      const reason =
        hook.events.length > 0 && !hook.events.includes(signed.event)
          ? 'event'
          : !payloadMatches(payload, hook.match)
            ? 'match'
            : undefined;
      if (reason) {
        deps.log.debug({ hook: name, deliveryId: signed.deliveryId, event: signed.event, reason }, 'webhook delivery ignored');
        res.status(202).json({ status: 'ignored', hook: name, reason });
        return;
      }
      const accepted = await actOnDelivery(deps, { hook: name, config: hook, deliveryId: signed.deliveryId, event: signed.event, payload });
      res.status(202).json(accepted);
    },
  );
  return router;
}

/** Whether `address` is in `allowFrom` (addresses and CIDR ranges); an empty list allows every sender. */
function senderAllowed(address: string | undefined, allowFrom: readonly string[]): boolean {
  if (allowFrom.length === 0) return true;
  if (address === undefined || !ipaddr.isValid(address)) return false;
  const addr = ipaddr.process(address);
  return allowFrom.some((entry) => {
    const [range, bits] = entry.includes('/') ? ipaddr.parseCIDR(entry) : [ipaddr.process(entry), -1];
    if (range.kind() !== addr.kind()) return false;
    return bits < 0 ? range.toString() === addr.toString() : addr.match(range, bits);
  });
}

/**
 * The payload of a verified body: JSON, or GitHub's `application/x-www-form-urlencoded` form whose
 * `payload` field is the JSON.
 * @throws HttpError 400 when it is neither
 */
function parsePayload(body: Buffer, contentType: string): unknown {
  let text = body.toString('utf8');
  if (contentType.startsWith('application/x-www-form-urlencoded')) text = new URLSearchParams(text).get('payload') ?? '';
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new HttpError(400, 'The body is not JSON.', 'invalid_request_error', 'invalid_json');
  }
}
