/**
 * A tiny OpenAI-compatible Chat Completions endpoint for tests: answers every
 * request with `reply(prompt)` after `delayMs`, and counts the calls.
 */
import { createServer, type Server } from 'node:http';

export interface FakeModel {
  /** `http://127.0.0.1:<port>/v1` */
  baseUrl: string;
  /** The last user message of every request, in arrival order. */
  prompts: string[];
  close(): Promise<void>;
}

export async function startFakeModel(
  options: { reply?: (prompt: string) => string; delayMs?: number } = {},
): Promise<FakeModel> {
  const prompts: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const parsed = JSON.parse(body || '{}') as { messages?: Array<{ role: string; content: string }> };
      const prompt = [...(parsed.messages ?? [])].reverse().find((m) => m.role === 'user')?.content ?? '';
      prompts.push(prompt);
      const content = options.reply ? options.reply(prompt) : `done: ${prompt}`;
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({
          id: `chatcmpl-${prompts.length}`, object: 'chat.completion', created: Math.floor(Date.now() / 1000), model: 'fake',
          choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content } }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        }));
      }, options.delayMs ?? 0);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    prompts,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
