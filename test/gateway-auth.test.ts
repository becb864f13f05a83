/**
 * The bearer key is checked before a request body is read or parsed: a
 * caller without the key cannot make the gateway read or parse megabytes.
 */
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { assertBindAllowed, isLoopbackHost } from '../gateway/http/auth.ts';
import { createLogger } from '../scheduler/logger.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { waitFor } from './support/wait-for.ts';

const KEY = 'auth-test-key-123456';

let env: TestEnv;
let gw: Gateway;

beforeAll(async () => {
  env = testEnv({ 'api_server.port': 0, 'api_server.key': KEY });
  gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: env.config.log_level }) });
});

afterAll(async () => {
  await gw?.close();
  env?.cleanup();
});

/**
 * Send the headers of a POST announcing `contentLength` bytes of JSON and only the first
 * `sent` bytes of it; collect what the server answers and whether it closed the connection.
 */
function partialPost(path: string, headers: Record<string, string>, contentLength: number, sent: string) {
  const socket = connect(gw.httpAddress.port, '127.0.0.1');
  const state = { response: '', closed: false };
  socket.on('data', (d: Buffer) => (state.response += d.toString('latin1')));
  socket.on('error', () => {});
  socket.on('close', () => (state.closed = true));
  const head = [
    `POST ${path} HTTP/1.1`,
    `Host: 127.0.0.1:${gw.httpAddress.port}`,
    'Content-Type: application/json',
    `Content-Length: ${contentLength}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    '',
    '',
  ].join('\r\n');
  socket.write(head + sent);
  return { state, socket };
}

describe('bearer key before the body', () => {
  it.each(['/v1/chat/completions', '/v1/runs', '/api/schedules'])(
    'a 1.9 MB body without a key on %s gets 401 before the body was sent, and the connection is closed',
    async (path) => {
      const { state, socket } = partialPost(path, {}, 1_900_000, '{"messages":[{"role":"user","content":"');
      try {
        // The body is never completed: a server that reads or parses it first never answers.
        await waitFor(() => state.response.includes('\r\n\r\n'), 5_000, '401 response headers');
        expect(state.response).toMatch(/^HTTP\/1\.1 401 /);
        expect(state.response.toLowerCase()).toContain('connection: close');
        await waitFor(() => state.closed, 5_000, 'the server to close the connection');
      } finally {
        socket.destroy();
      }
    },
  );

  it('an unrouted path and a refused dashboard request answer before the body and close the connection', async () => {
    for (const [path, status] of [
      ['/no/such/route', 404],
      ['/admin/queues/api/queues', 401],
    ] as const) {
      const { state, socket } = partialPost(path, {}, 1_900_000, '{"x":"');
      try {
        await waitFor(() => state.response.includes('\r\n\r\n'), 5_000, `${path} response headers`);
        expect(state.response).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
        expect(state.response.toLowerCase()).toContain('connection: close');
        await waitFor(() => state.closed, 5_000, 'the server to close the connection');
      } finally {
        socket.destroy();
      }
    }
  });

  it('a wrong key with malformed JSON is 401 (the body is not parsed), with the key it is 400', async () => {
    const post = (auth: string) =>
      fetch(`${gw.httpAddress.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: '{not json',
      });
    const wrong = await post('Bearer nope');
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
    const right = await post(`Bearer ${KEY}`);
    expect(right.status).toBe(400);
  });
});

/** A request with exactly these headers (fetch may not set `Host`). @returns status and parsed body */
function rawRequest(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('loopback rule (bind check and browser guard)', () => {
  it('knows loopback in every spelling and nothing else', () => {
    for (const h of ['127.0.0.1', '127.1', '127.255.0.9', '::1', '[::1]', '::ffff:127.0.0.1', '::ffff:7f00:1', 'localhost', 'LOCALHOST']) {
      expect(isLoopbackHost(h), h).toBe(true);
    }
    for (const h of [
      '0.0.0.0',
      '0',
      '::',
      '10.0.0.1',
      '::ffff:10.0.0.1',
      '127.0.0.1.nip.io',
      'localhost.evil.example',
      'example.com',
      '',
    ]) {
      expect(isLoopbackHost(h), h).toBe(false);
    }
    expect(() => assertBindAllowed('0.0.0.0', undefined)).toThrow(/without a key/);
    expect(() => assertBindAllowed('::ffff:7f00:1', undefined)).not.toThrow();
  });
});

describe('browser guard (DNS rebinding, cross-site requests)', () => {
  it("with a key: a request whose Origin is another site is refused with 403, key or not; the gateway's own origin and no Origin pass", async () => {
    const port = gw.httpAddress.port;
    const bearer = { authorization: `Bearer ${KEY}` };
    const evil = await rawRequest(port, 'POST', '/api/cron/jobs/x/run', {
      ...bearer,
      origin: 'https://evil.example',
      'content-type': 'text/plain',
    });
    expect(evil.status).toBe(403);
    expect(JSON.parse(evil.body).error.code).toBe('cross_origin_refused');
    expect((await rawRequest(port, 'GET', '/api/schedules', { ...bearer, origin: 'null' })).status).toBe(403);
    // The dashboard's cached Basic credentials do not help a foreign page either.
    const basic = { authorization: `Basic ${Buffer.from(`admin:${KEY}`).toString('base64')}` };
    expect((await rawRequest(port, 'GET', '/admin/queues', { ...basic, origin: 'https://evil.example' })).status).toBe(403);
    expect((await rawRequest(port, 'GET', '/admin/queues', { ...basic, origin: `http://127.0.0.1:${port}` })).status).toBe(200);
    expect((await rawRequest(port, 'GET', '/api/schedules', bearer)).status).toBe(200);
    // behind a TLS proxy: the browser's Origin leaves out the default port the proxy's Host names
    expect(
      (await rawRequest(port, 'GET', '/api/schedules', { ...bearer, host: 'gw.example:443', origin: 'https://gw.example' })).status,
    ).toBe(200);
    expect(
      (await rawRequest(port, 'GET', '/api/schedules', { ...bearer, host: 'gw.example:443', origin: 'http://gw.example' })).status,
    ).toBe(403);
  });

  it('without a key (api_server.insecure_no_auth): only requests addressed to a loopback name are served (a rebound name gets 403); health answers any Host', async () => {
    const open = testEnv({ 'api_server.port': 0, 'api_server.key': undefined, 'api_server.insecure_no_auth': true });
    const keyless = await startGateway({
      config: open.config,
      redisUrl: open.redisUrl,
      log: createLogger({ level: open.config.log_level }),
    });
    try {
      const port = keyless.httpAddress.port;
      const rebound = await rawRequest(port, 'GET', '/api/cron/jobs', { host: `rebind.attacker.example:${port}` });
      expect(rebound.status).toBe(403);
      expect(JSON.parse(rebound.body).error).toMatchObject({ code: 'host_not_allowed' });
      expect(
        (
          await rawRequest(port, 'POST', '/v1/chat/completions', {
            host: `rebind.attacker.example:${port}`,
            'content-type': 'application/json',
          })
        ).status,
      ).toBe(403);
      for (const host of [
        `[::1]evil.example:${port}`,
        `127.0.0.1:evil`,
        `[::1].evil.example`,
        `localhost.evil.example:${port}`,
        `127.0.0.1.nip.io:${port}`,
      ]) {
        expect((await rawRequest(port, 'GET', '/api/schedules', { host })).status, host).toBe(403);
      }
      // loopback in every spelling a browser sends, and localhost names (RFC 6761: never resolved through DNS)
      for (const host of [
        `127.0.0.1:${port}`,
        `localhost:${port}`,
        `[::1]:${port}`,
        `[::ffff:7f00:1]:${port}`,
        `localhost.:${port}`,
        `app.localhost:${port}`,
      ]) {
        expect((await rawRequest(port, 'GET', '/api/schedules', { host })).status, host).toBe(200);
      }
      expect((await rawRequest(port, 'GET', '/health/live', { host: 'proxy.example' })).status).toBe(200);
    } finally {
      await keyless.close();
      open.cleanup();
    }
  });
});
