/**
 * Provenance and the transcript a turn sends (worker/context/transcript-messages.ts), pinned on each
 * kind of message a context can hold: a message's own surface, a compaction summary's surfaces, an
 * unknown surface, tool results whose call was trimmed, and a turn's steps. End to end with real
 * turns: provenance.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { TranscriptMessage } from '../scheduler/session/session-store.ts';
import { contextSurfaces, holdsToolOutput, stepMessages, turnMessages } from '../worker/context/transcript-messages.ts';

const msg = (over: Partial<TranscriptMessage>): TranscriptMessage => ({ role: 'user', content: 'x', at: 1, source: 'message', ...over });

describe('contextSurfaces: a turn answers to its own surface and every other one in its context', () => {
  it('its own surface alone is one surface, not a list; a message of the same surface or of none adds nothing', () => {
    expect(contextSurfaces('cli', [])).toBe('cli');
    expect(contextSurfaces('cli', [msg({ surface: 'cli' }), msg({})])).toBe('cli');
  });

  it("another surface's message in the context (a tick whose transcript holds a Telegram message) is added after its own", () => {
    expect(contextSurfaces('cron', [msg({ surface: 'telegram' })])).toEqual(['cron', 'telegram']);
    expect(contextSurfaces('cli', [msg({ surface: 'api' }), msg({ surface: 'api' }), msg({ surface: 'web' })])).toEqual([
      'cli',
      'api',
      'web',
    ]);
  });

  it("a compaction summary's surfaces count as the messages it stands for; a name that is no tool surface is left out", () => {
    expect(contextSurfaces('cli', [msg({ role: 'assistant', surfaces: ['telegram', 'api'] })])).toEqual(['cli', 'telegram', 'api']);
    expect(contextSurfaces('cli', [msg({ surface: 'tick' })])).toBe('cli');
    expect(contextSurfaces('cli', [msg({ surface: 'tick', surfaces: ['mcp'] })])).toEqual(['cli', 'mcp']);
  });
});

describe('holdsToolOutput', () => {
  it("a tool's result or a summary standing for one; not the schedules tool's own answer, not an assistant message", () => {
    expect(holdsToolOutput([msg({ role: 'tool', name: 'read_file', tool_call_id: 'a' })])).toBe(true);
    expect(holdsToolOutput([msg({ role: 'assistant', tool_output: true })])).toBe(true);
    expect(holdsToolOutput([msg({ role: 'tool', name: 'schedules', tool_call_id: 'a' })])).toBe(false);
    expect(holdsToolOutput([msg({ role: 'assistant' }), msg({})])).toBe(false);
    expect(holdsToolOutput([])).toBe(false);
  });
});

describe('turnMessages', () => {
  const call = { id: 'c1', name: 'read_file', arguments: '{}' };
  it('keeps a call with its result (and the tool name), appends the input as the last user message', () => {
    const out = turnMessages(
      [
        msg({ content: 'hi' }),
        msg({ role: 'assistant', content: '', tool_calls: [call] }),
        msg({ role: 'tool', content: 'r', tool_call_id: 'c1', name: 'read_file' }),
        msg({ role: 'assistant', content: 'done' }),
      ],
      'next',
    );
    expect(out).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: '', tool_calls: [call] },
      { role: 'tool', tool_call_id: 'c1', content: 'r', name: 'read_file' },
      { role: 'assistant', content: 'done' },
      { role: 'user', content: 'next' },
    ]);
    const unnamed = turnMessages(
      [msg({ role: 'assistant', content: '', tool_calls: [call] }), msg({ role: 'tool', content: 'r', tool_call_id: 'c1' })],
      'n',
    );
    expect(unnamed[1]).toEqual({ role: 'tool', tool_call_id: 'c1', content: 'r' });
  });

  it('drops a result whose call was trimmed off, and a call one of whose results is missing', () => {
    const orphan = turnMessages([msg({ role: 'tool', content: 'r', tool_call_id: 'gone' }), msg({ content: 'hi' })], 'n');
    expect(orphan).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'user', content: 'n' },
    ]);
    const noId = turnMessages([msg({ role: 'assistant', content: '', tool_calls: [call] }), msg({ role: 'tool', content: 'r' })], 'n');
    expect(noId).toEqual([{ role: 'user', content: 'n' }]);
    const half = turnMessages(
      [
        msg({ role: 'assistant', content: '', tool_calls: [call, { ...call, id: 'c2' }] }),
        msg({ role: 'tool', content: 'r', tool_call_id: 'c1' }),
        msg({ role: 'assistant', content: 'ok' }),
      ],
      'n',
    );
    expect(half).toEqual([
      { role: 'tool', tool_call_id: 'c1', content: 'r' },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'n' },
    ]);
    // An assistant message with an empty list of calls is plain text.
    expect(turnMessages([msg({ role: 'assistant', content: 'a', tool_calls: [] })], 'n')[0]).toEqual({ role: 'assistant', content: 'a' });
  });
});

describe('stepMessages', () => {
  it("a turn's tool calls and results, with its time, source and surface; a user step is not one", () => {
    const call = { id: 'c1', name: 'http_get', arguments: '{}' };
    const steps = stepMessages(
      [
        { role: 'assistant', content: '', tool_calls: [call] },
        { role: 'tool', tool_call_id: 'c1', content: 'page', name: 'http_get' },
        { role: 'tool', tool_call_id: 'c1', content: 'again' },
        { role: 'assistant', content: 'plain' },
        { role: 'user', content: 'u' },
      ],
      7,
      'goal',
      'telegram',
    );
    expect(steps).toEqual([
      { role: 'assistant', content: '', at: 7, source: 'goal', tool_calls: [call], surface: 'telegram' },
      { role: 'tool', content: 'page', at: 7, source: 'goal', tool_call_id: 'c1', name: 'http_get', surface: 'telegram' },
      { role: 'tool', content: 'again', at: 7, source: 'goal', tool_call_id: 'c1', surface: 'telegram' },
      { role: 'assistant', content: 'plain', at: 7, source: 'goal', surface: 'telegram' },
    ]);
    expect(stepMessages([{ role: 'assistant', content: 'a' }], 1, 'message')).toEqual([
      { role: 'assistant', content: 'a', at: 1, source: 'message' },
    ]);
  });
});
