/**
 * Every provider's refusal for length is understood (docs/CONTEXT.md "Refusals"): a loop against a
 * model server that refuses past its window in that provider's words and status code, with no
 * window configured (the model's name says 128,000), learns the window (or halves it) after a few
 * refused requests and runs on with no failed tick; what it learned is stored for the fleet. Real
 * Redis, real BullMQ, a real worker, the real `openai` client against the local model server.
 */
import { describe } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { events, waitFor } from './support/stack.ts';
import type { ProviderRefusal } from './support/provider-refusals.ts';
import { startAgentStack } from './support/agent-stack.ts';
import { ciLog, ciWatcher, loopSpec } from './support/ci-watch.ts';
import { it } from './support/cleanup.ts';
import { modelStateFor } from '../scheduler/services.ts';

/** The shapes the loop runs against, each with what it should teach an 8,000-token window as. */
const SHAPES: Array<{ provider: ProviderRefusal; how: 'stated' | 'halved' }> = [
  { provider: 'openai', how: 'stated' },
  { provider: 'llama.cpp', how: 'halved' },
  { provider: 'vllm', how: 'stated' },
  { provider: 'anthropic', how: 'stated' },
  { provider: 'gemini', how: 'stated' },
  { provider: 'tgi', how: 'stated' },
];

const WINDOW = 8_000;
const TICKS = 20;

// Each test has its own model server, worker, Redis prefix and folder, so they all run side by side.
describe.concurrent("refusals in every provider's words", () => {
  describe('a loop reading a 12 KB log at every tick, against a model refusing past 8,000 tokens, no window configured', () => {
    for (const { provider, how } of SHAPES) {
      it(`${provider}'s refusal is ${how === 'stated' ? 'learned' : 'halved'}: ${TICKS} ticks, none failed, a few refused requests`, async ({
        cleanups,
        expect,
      }) => {
        const { c, model, dir } = await startAgentStack(cleanups, {}, { contextWindow: WINDOW, refusal: provider });
        const log = join(dir, 'ci.log');
        writeFileSync(log, ciLog(12, 'running'));
        model.respond(ciWatcher(log));
        await c.schedules.set('ci', 'loop', loopSpec('watch the CI build and tell me when it is green', 0.1, TICKS), {
          origin: { surface: 'cli' },
          runner: { kind: 'agent' },
        });
        await waitFor(
          async () => ((await c.loops.get('ci', 'loop'))?.status === 'finished' ? true : undefined),
          // A ceiling, not a speed: six loops of 20 turns over 12 KB side by side take minutes on a busy machine.
          400_000,
          `the loop ran its ${TICKS} ticks`,
        );

        const loop = (await c.loops.get('ci', 'loop'))!;
        expect(loop.ticksUsed).toBe(TICKS);
        const all = await events(c, 'ci');
        expect(all.filter((e) => e.type === 'tick.failed')).toEqual([]);
        expect(all.filter((e) => e.type === 'reply')).toHaveLength(TICKS);
        // Refused a few times, early, and never again once learned.
        expect(model.refusedForLength).toBeGreaterThanOrEqual(1);
        expect(model.refusedForLength).toBeLessThanOrEqual(3);
        const lastRefused = model.requests.findLastIndex((r) => r.refusedForLength);
        expect(lastRefused).toBeLessThan(model.requests.length / 4);
        const refusedEvents = all.filter((e) => e.type === 'model.refused');
        expect(refusedEvents).toHaveLength(model.refusedForLength);
        expect(refusedEvents[0]!.data).toMatchObject({ model: 'gpt-4o-mini', how, status: provider === 'tgi' ? 422 : 400 });
        // What it learned is the fleet's: stored by endpoint and model, with whose words they were.
        const stored = await modelStateFor(c.redis, c.keys).read({ endpoint: model.baseUrl, model: 'gpt-4o-mini' });
        expect(stored.window).toMatchObject({ how });
        if (how === 'stated') expect(stored.window!.tokens).toBe(WINDOW);
        else expect(stored.window!.tokens).toBeLessThan(128_000);
        expect(stored.window!.said).not.toMatch(/no body/);
      }, 430_000);
    }
  });

  describe('the field scenario', () => {
    it('a 0.5 s loop reading a 120 KB log against a model refusing past 16,000 tokens in llama.cpp words, no window configured: active after 20 ticks, at most 3 requests refused', async ({
      cleanups,
      expect,
    }) => {
      const { c, model, dir } = await startAgentStack(cleanups, {}, { contextWindow: 16_000, refusal: 'llama.cpp' });
      const log = join(dir, 'ci.log');
      writeFileSync(log, ciLog(120, 'running'));
      model.respond(ciWatcher(log));
      await c.schedules.set('ci', 'loop', loopSpec('watch the CI build and tell me when it is green', 0.5, null), {
        origin: { surface: 'cli' },
        runner: { kind: 'agent' },
      });
      await waitFor(async () => ((await events(c, 'ci', 'reply')).length >= 20 ? true : undefined), 300_000, '20 ticks replied');
      const loop = (await c.loops.get('ci', 'loop'))!;
      expect(loop.status).toBe('active');
      expect(loop.failureStreak ?? 0).toBe(0);
      expect(await events(c, 'ci', 'tick.failed')).toEqual([]);
      expect(model.refusedForLength).toBeGreaterThanOrEqual(1);
      expect(model.refusedForLength).toBeLessThanOrEqual(3);
      await c.schedules.stop('ci', 'loop');
    }, 330_000);
  });
});
