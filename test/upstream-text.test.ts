/**
 * How an upstream's failure reads (scheduler/errors/upstream-text.ts): a status code is said once —
 * "The model endpoint answered 500: The server had an error", never "answered 500: 500 The server
 * had an error" — and a platform's start failure names its cause: a refused token, a wrong API
 * address (404), or no answer at all. The messages come from the real clients' error classes
 * (openai, @discordjs/rest, grammY, @slack/web-api) and, for the model endpoint, from the real
 * `openai` client against the tests' local model server.
 */
import { describe, expect, it } from 'vitest';
import { APIError } from 'openai';
import { DiscordAPIError } from '@discordjs/rest';
import { GrammyError } from 'grammy';
import {
  answeredText,
  networkReason,
  platformStartFailure,
  showEndpoint,
  statusText,
  withoutStatus,
  type PlatformEndpoint,
} from '../scheduler/errors/upstream-text.ts';
import { TurnError } from '../scheduler/errors/turn-error.ts';
import { AgentRunner } from '../worker/turn-runners/agent-runner.ts';
import { startFakeOpenAI, type ScriptedReply } from './support/fake-openai.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const cleanups = cleanupAfterEach();

/** A status code said twice: `500: 500 …`, `(404 404: …)`. */
const REPEATED = /\b(\d{3})\b\D{1,3}\1\b/;

const DISCORD: PlatformEndpoint = {
  name: 'Discord',
  url: 'http://127.0.0.1:9000/api',
  urlSetting: 'DISCORD_API_URL',
  tokenSetting: 'DISCORD_BOT_TOKEN',
};
const TELEGRAM: PlatformEndpoint = {
  name: 'Telegram',
  url: 'https://api.telegram.org',
  tokenSetting: 'TELEGRAM_BOT_TOKEN',
  tokenInPath: true,
};

const headers = new Headers({ 'content-type': 'application/json' });
const discordError = (status: number, body: { message: string; code: number }) =>
  new DiscordAPIError(body, body.code, status, 'GET', 'http://127.0.0.1:9000/api/v10/users/@me', {});

describe('a status code is said once', () => {
  it('withoutStatus takes off the copy clients put in front, and nothing else', () => {
    expect(withoutStatus('500 The server had an error', 500)).toBe('The server had an error');
    expect(withoutStatus('404: Not Found', 404)).toBe('Not Found');
    expect(withoutStatus('HTTP 502: Bad Gateway', 502)).toBe('Bad Gateway');
    expect(withoutStatus('http 502 Bad Gateway', 502)).toBe('Bad Gateway');
    // near misses: another code, a longer number, a decimal, the code later in the text
    expect(withoutStatus('404: Not Found', 500)).toBe('404: Not Found');
    expect(withoutStatus('5000 tokens over the limit', 500)).toBe('5000 tokens over the limit');
    expect(withoutStatus('500.5 is not a model', 500)).toBe('500.5 is not a model');
    expect(withoutStatus('Not Found (404)', 404)).toBe('Not Found (404)');
  });

  it('OpenAI-style bodies (500 and 404), as the openai client words them, read with the code once', () => {
    const e500 = APIError.generate(
      500,
      { error: { message: 'The server had an error while processing your request.' } },
      undefined,
      headers,
    );
    expect(e500.message).toBe('500 The server had an error while processing your request.');
    expect(answeredText('The model endpoint', 500, e500.message)).toBe(
      'The model endpoint answered 500: The server had an error while processing your request.',
    );
    const e404 = APIError.generate(
      404,
      { error: { message: 'The model `gpt-9` does not exist', type: 'invalid_request_error', code: 'model_not_found' } },
      undefined,
      headers,
    );
    expect(answeredText('The model endpoint', 404, e404.message)).toBe('The model endpoint answered 404: The model `gpt-9` does not exist');
    expect(answeredText('The model endpoint', 503)).toBe('The model endpoint answered 503');
    expect(answeredText('The model endpoint', 503, '503')).toBe('The model endpoint answered 503');
  });

  it('platform-style bodies (Discord, Telegram) read with the code once', () => {
    const d404 = discordError(404, { message: '404: Not Found', code: 0 });
    expect(statusText(d404.status, d404.message)).toBe('404 Not Found');
    const d403 = discordError(403, { message: 'Missing Access', code: 50001 });
    expect(statusText(d403.status, d403.message)).toBe('403 Missing Access');
    const t403 = new GrammyError(
      "Call to 'sendMessage' failed!",
      { ok: false, error_code: 403, description: 'Forbidden: bot was blocked by the user' },
      'sendMessage',
      {},
    );
    expect(statusText(t403.error_code, t403.description)).toBe('403 Forbidden: bot was blocked by the user');
    expect(statusText(500)).toBe('500');
    for (const text of [statusText(404, d404.message), answeredText('x', 404, d404.message), answeredText('x', 500, '500: 500 oops')]) {
      expect(text).not.toMatch(REPEATED);
    }
  });
});

describe("a platform's start failure names its cause", () => {
  it('401 and 403: the token was refused', () => {
    const d401 = discordError(401, { message: '401: Unauthorized', code: 0 });
    expect(platformStartFailure(DISCORD, { kind: 'answer', status: d401.status, message: d401.message })).toBe(
      'Discord refused the bot token (DISCORD_BOT_TOKEN): http://127.0.0.1:9000/api (DISCORD_API_URL) answered 401: Unauthorized.',
    );
    expect(platformStartFailure(TELEGRAM, { kind: 'answer', status: 403, message: 'Forbidden' })).toBe(
      'Telegram refused the bot token (TELEGRAM_BOT_TOKEN): https://api.telegram.org answered 403: Forbidden.',
    );
  });

  it('404 from an address the operator set: the API is not there — not a refused token', () => {
    const d404 = discordError(404, { message: '404: Not Found', code: 0 });
    const text = platformStartFailure(DISCORD, { kind: 'answer', status: d404.status, message: d404.message });
    expect(text).toBe("Discord's API is not at http://127.0.0.1:9000/api (DISCORD_API_URL): it answered 404: Not Found.");
    expect(text).not.toMatch(/refused/);
    expect(platformStartFailure(DISCORD, { kind: 'answer', status: 404 })).toBe(
      "Discord's API is not at http://127.0.0.1:9000/api (DISCORD_API_URL): it answered 404.",
    );
    // Telegram's token is in the path: at its own address a 404 is an unknown token, elsewhere either.
    expect(platformStartFailure(TELEGRAM, { kind: 'answer', status: 404, message: 'Not Found' })).toBe(
      'Telegram refused the bot token (TELEGRAM_BOT_TOKEN): https://api.telegram.org answered 404: Not Found.',
    );
    expect(
      platformStartFailure(
        { ...TELEGRAM, url: 'http://10.0.0.2:8081/', urlSetting: 'TELEGRAM_API_ROOT' },
        { kind: 'answer', status: 404, message: 'Not Found' },
      ),
    ).toBe(
      "Telegram's API is not at http://10.0.0.2:8081 (TELEGRAM_API_ROOT), or it does not know the bot token (TELEGRAM_BOT_TOKEN): it answered 404: Not Found.",
    );
  });

  it('other answers say what was answered; something that is not the API says so', () => {
    expect(platformStartFailure(DISCORD, { kind: 'answer', status: 500, message: '500: Internal Server Error' })).toBe(
      "Discord's API at http://127.0.0.1:9000/api (DISCORD_API_URL) answered 500: Internal Server Error.",
    );
    expect(
      platformStartFailure({ ...TELEGRAM, urlSetting: 'TELEGRAM_API_ROOT' }, { kind: 'unexpected', what: 'an answer that is not JSON' }),
    ).toBe("Telegram's API is not at https://api.telegram.org (TELEGRAM_API_ROOT): it sent an answer that is not JSON.");
  });

  it('no answer: could not connect to the address, with the network reason and never the client message that holds the token', () => {
    // grammY's HttpError wraps node-fetch's error, whose message holds the URL and so the token.
    const fetchError = Object.assign(new Error('request to http://127.0.0.1:1/bot123:SECRET/getMe failed'), { code: 'ECONNREFUSED' });
    const wrapped = Object.assign(new Error("Network request for 'getMe' failed!"), { error: fetchError });
    expect(networkReason(wrapped)).toBe('connection refused (ECONNREFUSED)');
    expect(networkReason(Object.assign(new Error('x'), { cause: { code: 'ENOTFOUND' } }))).toBe('host not found (ENOTFOUND)');
    expect(networkReason(Object.assign(new Error('x'), { code: 'EPROTO' }))).toBe('EPROTO');
    expect(networkReason(new Error('request to …/bot123:SECRET/getMe failed'))).toBe('no answer');
    expect(networkReason(new Error('socket hang up'), 'socket hang up')).toBe('socket hang up');
    expect(platformStartFailure(DISCORD, { kind: 'network', reason: networkReason(wrapped) })).toBe(
      "Could not connect to Discord's API at http://127.0.0.1:9000/api (DISCORD_API_URL): connection refused (ECONNREFUSED).",
    );
  });

  it('addresses are shown without credentials or a query', () => {
    expect(showEndpoint('https://user:secret@models.example.com/v1/?key=abc')).toBe('https://models.example.com/v1');
    expect(showEndpoint('not a url')).toBe('(unreadable URL)');
  });
});

describe('the model endpoint, through the real openai client', () => {
  const cases: Array<[string, ScriptedReply, string]> = [
    [
      'a 500 with an OpenAI error body',
      { raw: { error: { message: 'The server had an error while processing your request.', type: 'server_error' } }, status: 500 },
      'The model endpoint answered 500: The server had an error while processing your request.',
    ],
    [
      'a 404 with an OpenAI error body',
      {
        raw: { error: { message: 'The model `gpt-9` does not exist', type: 'invalid_request_error', code: 'model_not_found' } },
        status: 404,
      },
      'The model endpoint answered 404: The model `gpt-9` does not exist',
    ],
    ['a 500 with no body', { raw: '', status: 500, contentType: 'text/plain' }, 'The model endpoint answered 500'],
    [
      'a 404 page that is not JSON',
      { raw: 'Not Found', status: 404, contentType: 'text/plain' },
      'The model endpoint answered 404: Not Found',
    ],
  ];
  for (const [name, reply, message] of cases) {
    it(`${name}: "${message}"`, async () => {
      const model = await startFakeOpenAI();
      cleanups.push(() => model.close());
      model.respond(() => reply);
      const agent = new AgentRunner({ baseUrl: model.baseUrl, apiKey: 'k', model: 'm', timeoutSeconds: 10, maxRetries: 0 });
      const err = await agent.complete([{ role: 'user', content: 'hi' }], new AbortController().signal, 's').then(
        () => new Error('completed'),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(TurnError);
      expect((err as TurnError).message).toBe(message);
      expect((err as TurnError).message).not.toMatch(REPEATED);
    });
  }
});
