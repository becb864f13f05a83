/**
 * Connection limits of the gateway's HTTP server, so a flood of connections
 * that never send a request (half-open sockets) cannot take its file
 * descriptors or keep `/health/live` from answering:
 *
 * - `server.maxConnections` (`api_server.max_connections`) caps the sockets
 *   held at once; beyond it Node closes new ones at once (`drop`).
 * - Policy near the cap: once the open connections reach the cap minus a
 *   reserve (5%, at least 1), the oldest idle ones — no request in progress:
 *   a socket that never sent complete headers, or a keep-alive socket between
 *   requests — are closed to make room. So a fresh connection (a health probe)
 *   is always taken while any connection is idle; only connections that are
 *   serving a request (event streams are capped by `api_server.max_streams`)
 *   can fill the server.
 * - `headersTimeout` (`api_server.headers_timeout_ms`): a connection that has
 *   not sent complete headers by then is answered 408 and closed;
 *   `requestTimeout` (`api_server.request_timeout_ms`) bounds the whole request
 *   (headers and body; not the answer, so event streams and waiting `/v1`
 *   callers are not cut); `keepAliveTimeout` closes idle keep-alive sockets.
 *   Node looks at these every `connectionsCheckingInterval`, set here to a
 *   quarter of the header timeout (at most 1 s), so a timeout is enforced
 *   within that much of its value (Node's default look is every 30 s).
 *
 * The worker's metrics server (worker/runtime/metrics-server.ts) applies the same
 * rules with its own copy (worker/ and gateway/ never import each other).
 */
import type { Server, ServerOptions } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';

/** The limits (`api_server.*`, defaults in scheduler/config/config.ts `HTTP_LIMIT_DEFAULTS`). */
export interface ConnectionLimits {
  maxConnections: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

/** Interval of one warning about closed or dropped connections, ms. */
const WARN_INTERVAL_MS = 10_000;

/** `createServer` options for the timeouts (they must be given at creation for the checking interval). */
export function serverTimeoutOptions(limits: ConnectionLimits): ServerOptions {
  return {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
  };
}

/** Counters of what the guard did (tests, logs). */
export interface ConnectionGuardStats {
  /** Connections open now. */
  readonly open: number;
  /** Idle connections closed to make room. */
  readonly evicted: number;
  /** Connections Node refused at `maxConnections`. */
  readonly dropped: number;
}

/**
 * Apply the limits to `server` (created with `serverTimeoutOptions`) and start the eviction of idle
 * connections near the cap (policy above).
 */
export function guardConnections(server: Server, limits: ConnectionLimits, log: Logger): ConnectionGuardStats {
  server.maxConnections = limits.maxConnections;
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  const reserve = Math.max(1, Math.ceil(limits.maxConnections * 0.05));
  const softCap = Math.max(1, limits.maxConnections - reserve);
  /** Idle sockets, oldest first (a Set keeps insertion order). */
  const idle = new Set<Socket>();
  const active = new WeakMap<Socket, number>();
  /** Sockets closed here and not yet gone (their `close` comes later; they no longer count). */
  const closing = new WeakSet<Socket>();
  let open = 0;
  let evicted = 0;
  let dropped = 0;
  let unreported = 0;
  let lastWarn = -Infinity;
  const warn = () => {
    const now = Date.now();
    if (now - lastWarn < WARN_INTERVAL_MS) return;
    lastWarn = now;
    log.warn(
      { open, maxConnections: limits.maxConnections, closedIdle: unreported, evicted, dropped },
      'HTTP connection limit reached: idle connections closed to make room (api_server.max_connections)',
    );
    unreported = 0;
  };

  server.on('connection', (socket: Socket) => {
    open++;
    idle.add(socket);
    socket.once('close', () => {
      if (!closing.has(socket)) open--;
      idle.delete(socket);
    });
    // Make room while the newest connection is still idle itself: the oldest idle go first.
    let over = open - softCap;
    for (const victim of idle) {
      if (over <= 0 || victim === socket) break;
      idle.delete(victim);
      closing.add(victim);
      open--;
      victim.destroy();
      evicted++;
      unreported++;
      over--;
    }
    if (over > 0 || unreported > 0) warn();
  });
  server.on('request', (req, res) => {
    const socket = req.socket;
    idle.delete(socket);
    active.set(socket, (active.get(socket) ?? 0) + 1);
    res.once('close', () => {
      const n = (active.get(socket) ?? 1) - 1;
      active.set(socket, n);
      if (n === 0 && !socket.destroyed) idle.add(socket);
    });
  });
  server.on('drop', () => {
    dropped++;
    warn();
  });
  return {
    get open() {
      return open;
    },
    get evicted() {
      return evicted;
    },
    get dropped() {
      return dropped;
    },
  };
}
