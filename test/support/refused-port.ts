/**
 * A loopback port that refuses connections for the whole run. A freed ephemeral port (listen on 0,
 * close) is no such port: the kernel can hand it to another test's server a moment later, and a
 * test expecting "connection refused" then reads that server's answer. Ports below 1024 lie outside
 * the ephemeral range and no test binds one; the candidates also avoid the ports `fetch` refuses to
 * dial (its "bad ports": 1, 7, 9, …), so the refusal comes from the connection, not the client.
 */
import { connect } from 'node:net';

const CANDIDATES = [2, 3, 4, 5, 8, 10, 12, 14, 16, 18];

let found: Promise<number> | undefined;

/** A port on 127.0.0.1 a connection to which is refused (checked once per test process). */
export function refusedPort(): Promise<number> {
  found ??= (async () => {
    for (const port of CANDIDATES) if (await refuses(port)) return port;
    throw new Error(`every candidate port (${CANDIDATES.join(', ')}) on 127.0.0.1 accepts connections`);
  })();
  return found;
}

function refuses(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}
