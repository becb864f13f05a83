/**
 * The queue dashboard (`@bull-board/express`) at `/admin/queues`: every BullMQ
 * queue of the product (ticks, inbox, outbound-telegram, v1-runs), for an
 * operator's browser.
 *
 * Access: HTTP Basic auth with any user name and the API key (`API_SERVER_KEY`,
 * else the home's key file that `hermes key` prints) as the password, so a
 * browser can open it (it cannot send a bearer header); a bearer header with
 * the key is accepted too. Only with `api_server.insecure_no_auth` is the
 * dashboard open like `/api` (the server then only binds to loopback).
 * Nobody can frame it (security-headers.ts).
 *
 * Read-only unless `dashboard.read_only: false`: bull-board then hides the
 * actions and its API refuses them (retry, remove, clean, pause, add), so the
 * dashboard cannot change a schedule behind the product's back.
 */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import type { Express, RequestHandler, Router } from 'express';
import { keyMatches } from './auth.ts';

/** Where the dashboard is mounted. */
export const DASHBOARD_PATH = '/admin/queues';

/**
 * Basic auth (any user, the key as password) or a bearer key; a no-op without a key (`insecure_no_auth`).
 * A refusal asks the browser for credentials (`WWW-Authenticate: Basic`).
 * @param page - the realm and the name of what is refused, for the browser's prompt and the 401's text
 */
export function basicKeyAuth(key: string | undefined, page = { realm: 'hermes queues', name: 'The queue dashboard' }): RequestHandler {
  return (req, res, next) => {
    if (!key) return next();
    const header = (req.get('authorization') ?? '').trim();
    const basic = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header);
    const bearer = /^Bearer\s+(.+)$/i.exec(header);
    let presented: string | undefined;
    if (basic) {
      const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      presented = colon >= 0 ? decoded.slice(colon + 1) : undefined;
    } else if (bearer) {
      presented = bearer[1]!.trim();
    }
    if (presented !== undefined && keyMatches(presented, key)) return next();
    // Connection: close, as for the bearer key: an unread body is not drained either.
    res
      .status(401)
      .set({ 'WWW-Authenticate': `Basic realm="${page.realm}", charset="UTF-8"`, Connection: 'close' })
      .type('text/plain')
      .send(
        `${page.name} needs the API key: any user name (hermes), the key as the password (API_SERVER_KEY, or what \`hermes key\` prints).\n`,
      );
  };
}

/**
 * The dashboard's router for `queues`, to mount at `DASHBOARD_PATH`.
 * @param options.readOnly - `dashboard.read_only`
 */
export function dashboardRouter(queues: Queue[], options: { readOnly: boolean }): Router {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(DASHBOARD_PATH);
  // With several shards (`redis.shards`) a queue name exists once per shard: each shard's queues are
  // listed under their key prefix (`{hermes:1}:ticks`) so they stay apart.
  const names = queues.map((q) => q.name);
  const shared = new Set(names.filter((n, i) => names.indexOf(n) !== i));
  createBullBoard({
    queues: queues.map(
      (q) =>
        new BullMQAdapter(q, {
          readOnlyMode: options.readOnly,
          allowRetries: !options.readOnly,
          ...(shared.has(q.name) ? { prefix: `${q.opts.prefix ?? ''}:` } : {}),
        }),
    ),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'hermes queues' } },
  });
  // bull-board serves from an express app of its own, which would announce itself (`X-Powered-By`).
  const app = serverAdapter.getRouter() as Express;
  app.disable('x-powered-by');
  return app;
}
