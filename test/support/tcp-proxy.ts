/**
 * A TCP proxy between a process and Redis that can black-hole the connection (a network partition
 * as the process sees it): while cut, no byte goes either way and no connection is closed or
 * refused — the process's commands just get no answer, as behind a partition; `heal()` lets the
 * bytes held meanwhile through, in order. `cutOn(text)` cuts at the first command the process sends
 * that holds `text`, before Redis gets it: a crash test stops a process exactly before one write.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface TcpProxy {
  /** `redis://127.0.0.1:<port>`: give it to the process instead of Redis's own URL. */
  url: string;
  /** Stop every byte both ways (connections stay open; new ones are accepted and held). */
  cut(): void;
  /**
   * Cut when the process sends bytes holding `text` (or any of several; also across two reads), holding
   * those bytes: Redis never gets that command while cut.
   * @returns resolves when it cut
   */
  cutOn(text: string | readonly string[]): Promise<void>;
  /** Let bytes through again. */
  heal(): void;
  close(): Promise<void>;
}

/** A proxy to `target` (`redis://host:port`), passing bytes until `cut()`. */
export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  /** Bytes read while cut, with where they go, in the order they came. */
  let held: Array<[Socket, Buffer]> = [];
  let cutOff = false;
  let trigger: { texts: readonly string[]; cut: () => void } | undefined;
  const forward = (from: Socket, to: Socket, watched: boolean) => {
    let tail = '';
    from.on('data', (d: Buffer) => {
      if (watched && trigger && !cutOff) {
        const seen = tail + d.toString('latin1');
        tail = seen.slice(-Math.max(...trigger.texts.map((t) => t.length)));
        if (trigger.texts.some((t) => seen.includes(t))) {
          cutOff = true;
          trigger.cut();
          trigger = undefined;
        }
      }
      if (cutOff) held.push([to, d]);
      else to.write(d);
    });
  };
  const server: Server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    forward(client, upstream, true);
    forward(upstream, client, false);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `redis://127.0.0.1:${(server.address() as AddressInfo).port}`,
    cut() {
      cutOff = true;
    },
    cutOn(text) {
      return new Promise<void>((cut) => (trigger = { texts: typeof text === 'string' ? [text] : text, cut }));
    },
    heal() {
      cutOff = false;
      const through = held;
      held = [];
      for (const [to, d] of through) if (!to.destroyed) to.write(d);
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
