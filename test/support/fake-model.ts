/**
 * The local model server (`fake-openai.ts`) with the shape the cron tests use:
 * every request is answered with `reply(prompt)` after `delayMs`, and the last
 * user message of each request is recorded.
 */
import { startFakeOpenAI } from './fake-openai.ts';

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
  const server = await startFakeOpenAI();
  const prompts: string[] = [];
  server.respond((req) => {
    const prompt = [...req.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
    prompts.push(prompt);
    const text = options.reply ? options.reply(prompt) : `done: ${prompt}`;
    return options.delayMs ? { delayMs: options.delayMs, text } : text;
  });
  return { baseUrl: server.baseUrl, prompts, close: () => server.close() };
}
