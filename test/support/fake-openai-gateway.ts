/**
 * A local OpenAI-compatible Chat Completions server for gateway tests:
 * `POST /v1/chat/completions` answers with `reply(messages)` after `delayMs`.
 * Records every request. Not a mock of a library: the real `openai` client
 * talks HTTP to it.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeOpenAIMessage {
  role: string;
  content: string;
}

export interface FakeOpenAI {
  /** Base URL including `/v1`, for `agent.base_url`. */
  url: string;
  /** Bodies of the chat completion requests received. */
  requests: Array<{ model: string; messages: FakeOpenAIMessage[] }>;
  /** Requests whose answer was not sent yet. */
  readonly pending: number;
  delayMs: number;
  reply: (messages: FakeOpenAIMessage[]) => string;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Start the server on a free loopback port. */
export async function startFakeOpenAI(
  options: { delayMs?: number; reply?: (messages: FakeOpenAIMessage[]) => string } = {},
): Promise<FakeOpenAI> {
  let pending = 0;
  const fake: FakeOpenAI = {
    url: '',
    requests: [],
    get pending() {
      return pending;
    },
    delayMs: options.delayMs ?? 0,
    reply: options.reply ?? ((messages) => `echo: ${messages[messages.length - 1]?.content ?? ''}`),
    close: async () => {},
  };
  const server: Server = createServer(async (req, res) => {
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not found' } }));
      return;
    }
    const body = JSON.parse(await readBody(req)) as { model: string; messages: FakeOpenAIMessage[] };
    fake.requests.push(body);
    pending++;
    let gone = false;
    res.on('close', () => (gone = true));
    if (fake.delayMs > 0) await new Promise((r) => setTimeout(r, fake.delayMs));
    pending--;
    if (gone) return;
    const content = fake.reply(body.messages);
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        id: `chatcmpl-fake-${fake.requests.length}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  fake.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return fake;
}
