/**
 * The `fetch` under the model clients (worker/turn-runners/model-fetch.ts) keeps what the `openai` client relies
 * on from `fetch`: method, headers and body sent as given; status, its text, repeated headers and body handed
 * back, the body streamed as it arrives, asked for uncompressed; redirects followed up to a limit; an abort
 * before or during the answer; the client's timeout, abort and connection errors; a status no answer has. A real
 * HTTP server on loopback, the real `openai` client.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIUserAbortError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelFetch } from '../worker/turn-runners/model-fetch.ts';

let server: Server;
let base: string;
const routes = new Map<string, (req: IncomingMessage, body: string, res: ServerResponse) => void>();
const bodyOf = (req: IncomingMessage) =>
  new Promise<string>((resolve) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => resolve(text));
  });

beforeAll(async () => {
  server = createServer((req, res) => {
    void bodyOf(req).then((body) => {
      const route = routes.get(req.url ?? '');
      if (route) route(req, body, res);
      else res.writeHead(404).end('no route');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe('modelFetch', () => {
  it('sends the method, headers and body as given; answers status, repeated headers and body', async () => {
    let seen: { method?: string; auth?: string; type?: string; body?: string } = {};
    routes.set('/echo', (req, body, res) => {
      seen = { method: req.method, auth: req.headers.authorization, type: req.headers['content-type'], body };
      res.setHeader('x-part', ['one', 'two']);
      res.writeHead(201, 'Made It', { 'content-type': 'application/json' }).end('{"ok":true}');
    });
    const res = await modelFetch(`${base}/echo`, {
      method: 'POST',
      headers: new Headers({ authorization: 'Bearer k', 'content-type': 'application/json' }),
      body: '{"a":1}',
    });
    expect(seen).toEqual({ method: 'POST', auth: 'Bearer k', type: 'application/json', body: '{"a":1}' });
    expect(res.status).toBe(201);
    expect(res.statusText).toBe('Made It');
    expect(res.headers.get('x-part')).toBe('one, two');
    expect(await res.json()).toEqual({ ok: true });
  });

  it('follows redirects, a 307 keeping the method and body, to another origin too; more than 20 is an error', async () => {
    const other = createServer((req, res) => void bodyOf(req).then((body) => res.writeHead(200).end(`other ${req.method} ${body}`)));
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    const otherUrl = `http://127.0.0.1:${(other.address() as AddressInfo).port}/there`;
    try {
      routes.set('/old', (_req, _body, res) => res.writeHead(307, { location: '/new' }).end());
      routes.set('/new', (req, body, res) => res.writeHead(200).end(`${req.method} ${body}`));
      const res = await modelFetch(`${base}/old`, { method: 'POST', body: 'payload' });
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('POST payload');

      routes.set('/away', (_req, _body, res) => res.writeHead(308, { location: otherUrl }).end());
      expect(await (await modelFetch(`${base}/away`, { method: 'POST', body: 'p' })).text()).toBe('other POST p');

      let hops = 0;
      for (let i = 0; i <= 25; i++)
        routes.set(`/hop/${i}`, (_req, _body, res) => {
          hops++;
          res.writeHead(302, { location: `/hop/${i + 1}` }).end();
        });
      await expect(modelFetch(`${base}/hop/0`, { method: 'GET' })).rejects.toThrow(/redirected more than 20 times/);
      expect(hops).toBe(21);
    } finally {
      await new Promise((r) => other.close(r));
    }
  });

  it('asks for the answer uncompressed', async () => {
    let asked: string | undefined;
    routes.set('/plain', (req, _body, res) => {
      asked = req.headers['accept-encoding'];
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"plain":true}');
    });
    const res = await modelFetch(`${base}/plain`, { method: 'POST', body: '{}' });
    expect(asked).toBe('identity');
    expect(await res.json()).toEqual({ plain: true });
  });

  it('a status no answer has is an error, and the connection is let go', async () => {
    routes.set('/odd', (_req, _body, res) => res.writeHead(600).end('odd'));
    await expect(modelFetch(`${base}/odd`, { method: 'POST', body: '{}' })).rejects.toThrow(/HTTP status 600/);
  });

  it('an answer without a body (204) reads as empty', async () => {
    routes.set('/none', (_req, _body, res) => res.writeHead(204).end());
    const res = await modelFetch(`${base}/none`, { method: 'DELETE' });
    expect(res.status).toBe(204);
    expect(res.body).toBeNull();
  });

  it('streams the body as it arrives', async () => {
    let finish: () => void = () => {};
    routes.set('/stream', (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
      finish = () => res.end('data: [DONE]\n\n');
    });
    const res = await modelFetch(`${base}/stream`, { method: 'POST', body: '{}' });
    const reader = res.body!.getReader();
    const first = await reader.read(); // the server has not ended the answer yet
    expect(new TextDecoder().decode(first.value)).toBe('data: first\n\n');
    finish();
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    expect(rest).toBe('data: [DONE]\n\n');
  });

  it('a body cancelled while data still arrives ends the request, and nothing throws', async () => {
    let closed: () => void = () => {};
    const serverSawClose = new Promise<void>((r) => (closed = r));
    routes.set('/endless', (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write(`data: ${'x'.repeat(1000)}\n\n`), 2);
      res.on('close', () => {
        clearInterval(timer);
        closed();
      });
    });
    const res = await modelFetch(`${base}/endless`, { method: 'POST', body: '{}' });
    const reader = res.body!.getReader();
    await reader.read();
    await new Promise((r) => setTimeout(r, 20)); // more arrives meanwhile
    await reader.cancel();
    await serverSawClose;

    // The client cancels the body of an answer it retries, all of it arrived and none read.
    routes.set('/busy', (_req, _body, res) => res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"busy"}'));
    for (let i = 0; i < 5; i++) await (await modelFetch(`${base}/busy`, { method: 'POST', body: '{}' })).body!.cancel();
    await new Promise((r) => setTimeout(r, 20)); // an error thrown late would fail the run here
  });

  it('an abort ends a request waiting for its answer, and a body being read', async () => {
    routes.set('/slow', () => {}); // never answers
    const waiting = new AbortController();
    const pending = modelFetch(`${base}/slow`, { method: 'POST', body: '{}', signal: waiting.signal });
    setTimeout(() => waiting.abort(), 50);
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });

    routes.set('/half', (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: part\n\n');
    });
    const reading = new AbortController();
    const res = await modelFetch(`${base}/half`, { method: 'POST', body: '{}', signal: reading.signal });
    const reader = res.body!.getReader();
    await reader.read();
    reading.abort();
    await expect(reader.read()).rejects.toMatchObject({ name: 'AbortError' });
  });

  it("is the openai client's fetch: a completion answers; an unreachable server is its connection error", async () => {
    routes.set('/v1/chat/completions', (_req, body, res) => {
      const { messages } = JSON.parse(body) as { messages: Array<{ content: string }> };
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          id: 'c1',
          object: 'chat.completion',
          created: 1,
          model: 'm',
          choices: [{ index: 0, message: { role: 'assistant', content: `echo ${messages[0]!.content}` }, finish_reason: 'stop' }],
        }),
      );
    });
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'k', fetch: modelFetch, maxRetries: 0 });
    const answer = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(answer.choices[0]?.message.content).toBe('echo hi');

    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const nowhere = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'k', fetch: modelFetch, maxRetries: 0 });
    const refused = nowhere.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    await expect(refused).rejects.toBeInstanceOf(APIConnectionError);
    await expect(refused).rejects.not.toBeInstanceOf(APIConnectionTimeoutError);
  });

  it("the client's timeout and its caller's abort end a call as the client's own errors", async () => {
    routes.set('/v1/chat/completions', () => {}); // never answers
    const slow = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'k', fetch: modelFetch, maxRetries: 0, timeout: 100 });
    await expect(slow.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })).rejects.toBeInstanceOf(
      APIConnectionTimeoutError,
    );
    const caller = new AbortController();
    const patient = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'k', fetch: modelFetch, maxRetries: 0 });
    const pending = patient.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }, { signal: caller.signal });
    setTimeout(() => caller.abort(), 50);
    await expect(pending).rejects.toBeInstanceOf(APIUserAbortError);
  });

  it('a body that is not a string or bytes goes through the standard fetch (its content type)', async () => {
    let type: string | undefined;
    routes.set('/form', (req, body, res) => {
      type = req.headers['content-type'];
      res.writeHead(200).end(`got ${body}`);
    });
    const res = await modelFetch(`${base}/form`, { method: 'POST', body: new URLSearchParams({ a: '1' }) });
    expect(await res.text()).toBe('got a=1');
    expect(type).toMatch(/^application\/x-www-form-urlencoded/);
  });
});
