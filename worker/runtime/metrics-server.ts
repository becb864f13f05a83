/**
 * A worker's own `GET /metrics` (Prometheus text) at `worker.metrics_port`,
 * so every worker of a fleet can be scraped where it runs. Plain `node:http`:
 * one route, no body, nothing else served.
 *
 * Access: `Authorization: Bearer <key>` with the gateway's key (`API_SERVER_KEY`,
 * else the home's key file: scheduler/config/api-key.ts), unless `metrics.public`
 * (open, wherever it binds: the operator's choice for a scraper that cannot send a
 * header). Without a key (`api_server.insecure_no_auth`) the server is open, which
 * is allowed only on a loopback address (the gateway's rule, docs/DESIGN.md §8).
 *
 * Connections are limited like the gateway's (gateway/http/connection-limits.ts,
 * `api_server.max_connections`, `headers_timeout_ms`, `request_timeout_ms`,
 * `keep_alive_timeout_ms`): a flood of half-open sockets is answered 408 and
 * closed after the header timeout, and near the cap the oldest idle
 * connections are closed to make room, so a scrape still gets in.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { HTTP_LIMIT_DEFAULTS } from '../../scheduler/config/config.ts';
import { ConfigError } from '../../scheduler/errors/config-error.ts';
import type { HermesMetrics } from '../../scheduler/metrics.ts';

/** A listening metrics server. */
export interface MetricsServer {
  /** `http://host:port` */
  readonly url: string;
  /** Stop listening and close its connections. Idempotent. */
  close(): Promise<void>;
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

function isLoopback(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^(::ffff:)?127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** Connection limits of the metrics server (the `api_server.*` settings of the same names). */
export interface MetricsConnectionLimits {
  maxConnections: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

/** The configuration's defaults (scheduler/config/config.ts `HTTP_LIMIT_DEFAULTS`). */
const DEFAULT_LIMITS: MetricsConnectionLimits = {
  maxConnections: HTTP_LIMIT_DEFAULTS.max_connections,
  headersTimeoutMs: HTTP_LIMIT_DEFAULTS.headers_timeout_ms,
  requestTimeoutMs: HTTP_LIMIT_DEFAULTS.request_timeout_ms,
  keepAliveTimeoutMs: HTTP_LIMIT_DEFAULTS.keep_alive_timeout_ms,
};

/**
 * Close the oldest idle connections (no request in progress) once the open ones reach the cap
 * minus a 5% reserve, so a new connection is always taken while any is idle.
 */
function evictIdleNearCap(server: Server, maxConnections: number): void {
  const softCap = Math.max(1, maxConnections - Math.max(1, Math.ceil(maxConnections * 0.05)));
  const idle = new Set<Socket>();
  const closing = new WeakSet<Socket>();
  let open = 0;
  server.on('connection', (socket: Socket) => {
    open++;
    idle.add(socket);
    socket.once('close', () => {
      if (!closing.has(socket)) open--;
      idle.delete(socket);
    });
    for (const victim of idle) {
      if (open <= softCap || victim === socket) break;
      idle.delete(victim);
      closing.add(victim);
      open--;
      victim.destroy();
    }
  });
  server.on('request', (req, res) => {
    const socket = req.socket;
    idle.delete(socket);
    res.once('close', () => {
      if (!socket.destroyed) idle.add(socket);
    });
  });
}

/**
 * Listen on `host:port` and serve `metrics`.
 * @param options.key - the API key (`resolveApiAuth`); `undefined` only for `insecure_no_auth` or `public`, and then loopback only unless `public`
 * @param options.limits - connection limits; default the configuration's defaults
 * @throws ConfigError for a non-loopback bind without a key (and not public), or a port that is taken
 */
export async function startMetricsServer(options: {
  host: string;
  port: number;
  key: string | undefined;
  public: boolean;
  metrics: HermesMetrics;
  log: Logger;
  limits?: MetricsConnectionLimits;
}): Promise<MetricsServer> {
  const limits = options.limits ?? DEFAULT_LIMITS;
  const { key, metrics } = options;
  if (!options.public && !key && !isLoopback(options.host)) {
    throw new ConfigError(
      `Refusing to serve worker metrics on ${options.host} without a key: api_server.insecure_no_auth is for loopback only. Drop it, set metrics.public: true, or bind to 127.0.0.1.`,
      { key: 'worker.metrics_port' },
    );
  }
  const server: Server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
    },
    (req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET' || path !== '/metrics') {
        res.writeHead(404, { 'Content-Type': 'text/plain' }).end('Only GET /metrics is served here.\n');
        return;
      }
      if (!options.public && key) {
        const m = /^Bearer\s+(.+)$/i.exec((req.headers.authorization ?? '').trim());
        if (!m || !timingSafeEqual(digest(m[1]!.trim()), digest(key))) {
          res
            .writeHead(401, { 'Content-Type': 'text/plain', 'WWW-Authenticate': 'Bearer' })
            .end('Send Authorization: Bearer <key> (API_SERVER_KEY, or the key `hermes key` prints on this host).\n');
          return;
        }
      }
      metrics.exposition().then(
        ({ contentType, body }) => res.writeHead(200, { 'Content-Type': contentType }).end(body),
        (err: Error) => {
          options.log.warn({ err: err.message }, 'metrics scrape failed');
          res.writeHead(500, { 'Content-Type': 'text/plain' }).end('metrics unavailable\n');
        },
      );
    },
  );
  server.maxConnections = limits.maxConnections;
  evictIdleNearCap(server, limits.maxConnections);
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new ConfigError(`Worker metrics cannot listen on ${options.host}:${options.port} (${err.code}); set worker.metrics_port.`, {
          key: 'worker.metrics_port',
          cause: err,
        }),
      ),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
  options.log.info({ url, auth: options.public ? 'public' : key ? 'bearer' : 'none (loopback only)' }, 'worker metrics listening');
  let closing: Promise<void> | undefined;
  return {
    url,
    close() {
      closing ??= new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
