/**
 * The local model server (`fake-openai.ts`) with the shape the gateway tests
 * use: `reply(messages)` after a `delayMs` the test may change at any time.
 */
import { startFakeOpenAI as startServer } from './fake-openai.ts';

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

/** Start the server on a free loopback port. */
export async function startFakeOpenAI(
  options: { delayMs?: number; reply?: (messages: FakeOpenAIMessage[]) => string } = {},
): Promise<FakeOpenAI> {
  const server = await startServer();
  const fake: FakeOpenAI = {
    url: server.baseUrl,
    requests: server.requests,
    get pending() {
      return server.pending;
    },
    delayMs: options.delayMs ?? 0,
    reply: options.reply ?? ((messages) => `echo: ${messages[messages.length - 1]?.content ?? ''}`),
    close: () => server.close(),
  };
  server.respond((req) => {
    const text = fake.reply(req.messages);
    return fake.delayMs > 0 ? { delayMs: fake.delayMs, text } : text;
  });
  return fake;
}
