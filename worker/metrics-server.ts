/**
 * A worker's own `GET /metrics` (Prometheus text) at `worker.metrics_port`,
 * so every worker of a fleet can be scraped where it runs. Plain `node:http`:
 * one route, no body, nothing else served.
 *
 * Access: `Authorization: Bearer <API_SERVER_KEY>` like the gateway's `/api`,
 * unless `metrics.public`. Without a key the server is open, which is allowed
 * only on a loopback address (the gateway's rule, SPEC §8).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { ConfigError } from '../scheduler/errors/config-error.ts';
import type { HermesMetrics } from '../scheduler/metrics.ts';

/** A listening metrics server. */
export interface MetricsServer {
  /** `http://host:port` */
  readonly url: string;
  /** Stop listening and close its connections. Idempotent. */
  close(): Promise<void>;
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

function isLoopback(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^(::ffff:)?127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * Listen on `host:port` and serve `metrics`.
 * @param options.key - `API_SERVER_KEY`; required for a non-loopback bind unless `public`
 * @throws ConfigError for a non-loopback bind without a key (and not public), or a port that is taken
 */
export async function startMetricsServer(options: {
  host: string;
  port: number;
  key: string | undefined;
  public: boolean;
  metrics: HermesMetrics;
  log: Logger;
}): Promise<MetricsServer> {
  const { key, metrics } = options;
  if (!options.public && !key && !isLoopback(options.host)) {
    throw new ConfigError(
      `Refusing to serve worker metrics on ${options.host} without a key: set API_SERVER_KEY, metrics.public: true, or bind to 127.0.0.1.`,
      { key: 'worker.metrics_port' },
    );
  }
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('Only GET /metrics is served here.\n');
      return;
    }
    if (!options.public && key) {
      const m = /^Bearer\s+(.+)$/i.exec((req.headers.authorization ?? '').trim());
      if (!m || !timingSafeEqual(digest(m[1]!.trim()), digest(key))) {
        res.writeHead(401, { 'Content-Type': 'text/plain', 'WWW-Authenticate': 'Bearer' }).end('Send Authorization: Bearer <API_SERVER_KEY>.\n');
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
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(new ConfigError(`Worker metrics cannot listen on ${options.host}:${options.port} (${err.code}); set worker.metrics_port.`, { key: 'worker.metrics_port', cause: err })));
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
