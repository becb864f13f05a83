/**
 * The gateway's HTTP server (express 5): the security headers of every answer
 * (`security-headers.ts`); `/health`, `/health/live`,
 * `/health/ready` (open; the details only with the key, see below); then the browser guard (no DNS-rebound or
 * cross-site request, `browser-guard.ts`); `/metrics` (Prometheus; behind the
 * key unless `metrics.public`); `/v1` (OpenAI compatible), `/api`
 * (management) and `/mcp` (this product's MCP server, gateway/mcp/), all behind the bearer key, then a 503 gate while Redis is
 * away, then the body parser; the queue dashboard and the web console (`/ui`) behind Basic auth.
 * `/hooks/<name>` (signed webhooks, `hook-routes.ts`) sits before the browser guard, like the
 * platforms' own paths: its sender signs each request instead of sending the key.
 *
 * There is always a key (scheduler/config/api-key.ts: `API_SERVER_KEY`, else the home's key
 * file) unless the operator opted out with `api_server.insecure_no_auth`, which is logged as a
 * warning and allowed on a loopback address only: the server then serves every local user.
 *
 * Default bind 127.0.0.1:8642 (`api_server.host`/`port`); a non-loopback bind
 * without a key is refused before anything listens (docs/DESIGN.md §8).
 *
 * Limits of what a caller can grow (`api_server.*`): connections and header,
 * request and keep-alive timeouts (connection-limits.ts), JSON nesting depth
 * (json-depth.ts), unsent bytes per event stream (sse.ts).
 *
 * Health without the key says only live or ready (`status`, and 503 with
 * `Retry-After` when not ready): the instance (host name and pid), the stream
 * count, readiness reasons and platform states (Telegram polling) need
 * `Authorization: Bearer <key>`; with `insecure_no_auth`, a request the
 * browser guard would serve (loopback `Host`, no cross-site `Origin`) gets them.
 */
import { ConfigError } from '../../scheduler/errors/config-error.ts';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { Logger } from 'pino';
import type { Queue } from 'bullmq';
import type { HermesMetrics } from '../../scheduler/metrics.ts';
import { basicKeyAuth, DASHBOARD_PATH, dashboardRouter } from './dashboard.ts';
import { apiRouter, type ApiDeps } from './api-routes.ts';
import type { ApiAuth } from '../../scheduler/config/api-key.ts';
import { assertBindAllowed, bearerAuth, presentsKey } from './auth.ts';
import { DASHBOARD_CSP, pagePolicy, securityHeaders } from './security-headers.ts';
import { browserGuard, browserRefusal } from './browser-guard.ts';
import { guardConnections, serverTimeoutOptions, type ConnectionLimits } from './connection-limits.ts';
import { jsonDepthGuard } from './json-depth.ts';
import { HttpError, errorHandler, storeUnavailableError } from './errors.ts';
import { REDIS_RETRY_AFTER_SECONDS, type GatewayHealth } from '../health.ts';
import type { SseStream } from './sse.ts';
import { v1Router, type V1Deps } from './v1/v1-routes.ts';
import type { PlatformHttpAnswer, PlatformHttpRequest } from '../plugins/platform-plugin.ts';
import { consoleRouter } from '../console/console-router.ts';
import type { ConsoleDeps } from '../console/console-data.ts';
import { CONSOLE_PATH } from '../console/layout.ts';
import { FAVICON_SVG, FAVICON_TYPE } from '../console/favicon.ts';
import type { McpDeps } from '../mcp/mcp-deps.ts';
import { mcpRouter } from '../mcp/mcp-http.ts';
import { hooksRouter, type HookRouteDeps } from './hook-routes.ts';

/** Largest accepted JSON body. */
export const BODY_LIMIT = '2mb';
/** Largest body of a platform's own path (Slack's events are a few kB). */
export const PLATFORM_BODY_LIMIT = '1mb';

/** Settings and collaborators of the HTTP server. */
export interface HttpServerOptions {
  host: string;
  /** 0 picks a free port (tests). */
  port: number;
  /** The key every route but health requires, or the `insecure_no_auth` opt-out (`resolveApiAuth`); the key is never logged. */
  auth: ApiAuth;
  v1: Omit<V1Deps, 'streams' | 'log'>;
  api: Omit<ApiDeps, 'streams' | 'log'>;
  /** Health checks (health.ts) and the details the health endpoints add to their body. */
  health: { checks: GatewayHealth; details: () => Record<string, unknown> };
  /** Metrics of this process: served at `/metrics`, and every request is counted. */
  metrics?: { registry: HermesMetrics; public: boolean };
  /** The web console at `/ui` (gateway/console/). */
  console?: Omit<ConsoleDeps, 'streams' | 'log' | 'sseMaxBufferedBytes'>;
  /** This product's MCP server at `/mcp` (gateway/mcp/), and the version it gives its clients. */
  mcp?: { deps: Omit<McpDeps, 'log'>; version: string };
  /** Signed webhooks at `/hooks/<name>` (`hook-routes.ts`), the hooks of `config.hooks`. */
  hooks?: Omit<HookRouteDeps, 'log' | 'storeGate'>;
  /** The queue dashboard at `/admin/queues` over these queues (`dashboard.ts`). */
  dashboard?: { queues: Queue[]; readOnly: boolean };
  /** Limits of callers (`api_server.*`). */
  limits: HttpLimits;
  /**
   * Platforms' own `POST` paths (`/slack/events`): no bearer key and no browser guard (the
   * platform signs its requests and the adapter checks that), the raw body handed over.
   */
  platformRoutes?: PlatformRoute[];
  log: Logger;
}

/** A platform's own `POST` path and who answers it. */
export interface PlatformRoute {
  path: string;
  handle(request: PlatformHttpRequest): Promise<PlatformHttpAnswer>;
}

/** What callers of the HTTP server may grow (`api_server.*`). */
export interface HttpLimits {
  connections: ConnectionLimits;
  /** `api_server.max_json_depth` */
  maxJsonDepth: number;
  /** `api_server.sse_max_buffered_bytes` */
  sseMaxBufferedBytes: number;
}

/** A listening server. */
export interface HttpServerHandle {
  /** `http://host:port` */
  readonly url: string;
  readonly address: AddressInfo;
  /** End open event streams, stop listening, close idle and then all connections. Idempotent. */
  close(): Promise<void>;
}

/** Build the express app (no listening). */
export function createApp(options: HttpServerOptions, streams: Set<SseStream>): express.Express {
  const log = options.log;
  const key = apiKey(options.auth);
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  app.use(securityHeaders());

  const metrics = options.metrics;
  if (metrics) app.use(countRequests(metrics.registry));

  // Health (no key): live = the process serves HTTP; ready = Redis answers and takes writes, and a worker is alive.
  // `/health` is an alias of `/health/ready`, so a probe of `/health` never reports a gateway
  // that can neither store nor run anything as healthy.
  // The details (host name, pid, platform states) only for a caller with the key (see the top).
  const details = (req: express.Request) =>
    key ? presentsKey(req.get('authorization'), key) : browserRefusal(req, undefined) === undefined;
  app.get('/health/live', (req, res) => {
    res.json(details(req) ? { status: 'ok', ...options.health.details() } : { status: 'ok' });
  });
  const ready: express.RequestHandler = async (req, res) => {
    const r = await options.health.checks.ready();
    if (!r.ready) res.status(503).set('Retry-After', String(REDIS_RETRY_AFTER_SECONDS));
    const status = r.ready ? 'ok' : 'unavailable';
    if (!details(req)) {
      res.json({ status });
      return;
    }
    res.json({
      status,
      reasons: r.reasons,
      redis: r.redis,
      worker_heartbeat_age_ms: r.workerHeartbeatAgeMs,
      ...options.health.details(),
    });
  };
  app.get('/health/ready', ready);
  app.get('/health', ready);

  // Platforms' own paths: the platform, not a browser or an API client, calls them, and signs
  // its requests (the adapter checks the signature before it reads anything).
  for (const route of options.platformRoutes ?? []) {
    app.post(route.path, express.raw({ type: () => true, limit: PLATFORM_BODY_LIMIT }), async (req, res, next) => {
      try {
        const answer = await route.handle({
          path: route.path,
          headers: req.headers,
          rawBody: Buffer.isBuffer(req.body) ? req.body.toString('utf8') : '',
        });
        res.status(answer.status);
        if (answer.json === undefined) res.end();
        else res.json(answer.json);
      } catch (err) {
        next(err);
      }
    });
  }

  // While Redis is away every request gets a 503 with Retry-After at once, not an error after
  // the client's retries run out (the key, or a hook's checks before its body, come first).
  const storeGate: express.RequestHandler = (_req, _res, next) => {
    next(options.health.checks.storeUp() ? undefined : storeUnavailableError());
  };

  // Signed webhooks: the sender signs each request (hook-routes.ts checks it before anything is stored).
  if (options.hooks) app.use('/hooks', hooksRouter({ ...options.hooks, storeGate, log: log.child({ component: 'hooks' }) }));

  // Everything below: no DNS-rebound or cross-site browser request (browser-guard.ts).
  app.use(browserGuard(key));

  // Order matters: the key is checked before the body is read or parsed, so a caller
  // without it cannot make the gateway read (or parse) up to BODY_LIMIT of input.
  const auth = bearerAuth(key);
  if (metrics) {
    const open: express.RequestHandler = (_req, _res, next) => next();
    app.get('/metrics', metrics.public ? open : auth, async (_req, res) => {
      const { contentType, body } = await metrics.registry.exposition();
      res.type(contentType).send(body);
    });
  }

  const parseJson = express.json({ limit: BODY_LIMIT, type: ['application/json', 'application/*+json'] });
  // A body nested deeper than the limit is a 400 before anything walks it (json-depth.ts).
  const jsonBody = [parseJson, jsonDepthGuard(options.limits.maxJsonDepth)];
  const sseMaxBufferedBytes = options.limits.sseMaxBufferedBytes;
  app.use(
    '/v1',
    auth,
    storeGate,
    ...jsonBody,
    v1Router({ ...options.v1, streams, sseMaxBufferedBytes, log: log.child({ component: 'v1' }) }),
  );
  app.use(
    '/api',
    auth,
    storeGate,
    ...jsonBody,
    apiRouter({ ...options.api, streams, sseMaxBufferedBytes, log: log.child({ component: 'api' }) }),
  );

  if (options.mcp) {
    const { deps, version } = options.mcp;
    app.use('/mcp', auth, storeGate, ...jsonBody, mcpRouter({ ...deps, log: log.child({ component: 'mcp' }) }, { version }));
  }

  if (options.dashboard) {
    // Gated like /api: the dashboard's queue reads would otherwise wait out the whole outage.
    app.use(
      DASHBOARD_PATH,
      basicKeyAuth(key),
      pagePolicy(DASHBOARD_CSP),
      storeGate,
      dashboardRouter(options.dashboard.queues, { readOnly: options.dashboard.readOnly }),
    );
  }

  if (options.console) {
    // The icon a browser asks the origin for, behind the console's key like every route but health.
    app.get('/favicon.ico', basicKeyAuth(key, { realm: 'hermes console', name: 'The console' }), (_req, res) => {
      res.set({ 'Content-Type': FAVICON_TYPE, 'Cache-Control': 'private, max-age=86400' }).send(FAVICON_SVG);
    });
    // Same access as the dashboard (a browser cannot send a bearer header); gated like /api.
    app.use(
      CONSOLE_PATH,
      basicKeyAuth(key, { realm: 'hermes console', name: 'The console' }),
      storeGate,
      consoleRouter({ ...options.console, streams, sseMaxBufferedBytes, log: log.child({ component: 'console' }) }),
    );
  }

  app.use((req, res, next) => {
    // Nothing here reads a body: close the connection rather than drain one that is still coming.
    res.set('Connection', 'close');
    next(new HttpError(404, `No route ${req.method} ${req.path}.`, 'not_found_error', 'route_not_found'));
  });
  app.use(errorHandler(log));
  return app;
}

/**
 * Count every request in `hermes_http_requests_total` once it is answered. The
 * route label is the matched route pattern (`/v1/runs/:id`), never the raw path,
 * so ids do not create series; requests that matched no route count as `unmatched`.
 */
function countRequests(metrics: HermesMetrics): express.RequestHandler {
  return (req, res, next) => {
    res.once('finish', () => {
      const pattern = (req.route as { path?: unknown } | undefined)?.path;
      metrics.httpRequests.inc({
        route: typeof pattern === 'string' ? routeLabel(req.originalUrl, pattern) : 'unmatched',
        status: String(res.statusCode),
      });
    });
    next();
  };
}

/**
 * The full route pattern of a request: its router's mount path (the leading
 * segments of the URL that the pattern does not cover; express has reset
 * `req.baseUrl` by the time the response is finished) plus the pattern.
 */
function routeLabel(originalUrl: string, pattern: string): string {
  const path = originalUrl.split('?')[0]!.replace(/\/+$/, '');
  const segments = path.split('/').filter(Boolean);
  const covered = pattern.split('/').filter(Boolean).length;
  const mount = segments.slice(0, Math.max(0, segments.length - covered)).join('/');
  return `${mount ? `/${mount}` : ''}${pattern === '/' && mount ? '' : pattern}`;
}

/** The key of `auth`, or `undefined` for the `insecure_no_auth` opt-out. */
function apiKey(auth: ApiAuth): string | undefined {
  return auth.mode === 'key' ? auth.key : undefined;
}

/**
 * Check the bind, then listen.
 * @throws ConfigError for a non-loopback host without a key, or an address that is taken or not allowed
 */
export async function startHttpServer(options: HttpServerOptions): Promise<HttpServerHandle> {
  assertBindAllowed(options.host, apiKey(options.auth));
  const streams = new Set<SseStream>();
  const app = createApp(options, streams);
  const server: Server = createServer(serverTimeoutOptions(options.limits.connections), app);
  guardConnections(server, options.limits.connections, options.log);
  await new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE' || err.code === 'EACCES' || err.code === 'EADDRNOTAVAIL'
          ? new ConfigError(
              `The HTTP API cannot listen on ${options.host}:${options.port} (${err.code}); set API_SERVER_PORT or API_SERVER_HOST.`,
              { key: 'api_server.port', cause: err },
            )
          : err,
      );
    server.once('error', onError);
    server.listen(options.port, options.host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  const auth = options.auth;
  if (auth.mode === 'key')
    options.log.info({ url, auth: 'bearer', key: auth.source === 'file' ? auth.file : 'API_SERVER_KEY' }, 'HTTP API listening');
  else
    options.log.warn(
      { url, auth: 'none', setting: 'api_server.insecure_no_auth' },
      'HTTP API listening WITHOUT A KEY (api_server.insecure_no_auth): every user of this host can run turns, read and write every session and set schedules as you',
    );
  let closing: Promise<void> | undefined;
  return {
    url,
    address,
    close() {
      closing ??= (async () => {
        for (const s of [...streams]) s.close();
        const closed = new Promise<void>((r) => server.close(() => r()));
        server.closeIdleConnections();
        const timer = setTimeout(() => server.closeAllConnections(), 1_000);
        await closed;
        clearTimeout(timer);
      })();
      return closing;
    },
  };
}
