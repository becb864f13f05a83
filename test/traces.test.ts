/**
 * Traces (docs/OPERATIONS.md, "Traces"): with an in-memory exporter installed as the process's tracing,
 * a loop tick is one trace — the job, the occurrence with its ids, its claim, its turn with the model and
 * tool calls, the commit and the delivery, each under its parent, in that order — which the reply's
 * outbound job carries on to the gateway's send of each part; a message from Telegram is one trace from
 * the gateway's receipt to the worker's turn; log lines written in a span carry its ids. Real Redis, a
 * real worker and gateway, real grammY against the local Bot API server, the real `openai` client
 * against the local model server.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe } from 'vitest';
import { startGateway } from '../gateway/gateway-process.ts';
import { createLogger } from '../scheduler/logger.ts';
import { otelTracing } from '../scheduler/telemetry/otel-tracing.ts';
import { ATTR, NO_TRACING, SPAN, tracing, useTracing } from '../scheduler/telemetry/tracing.ts';
import { WorkerProcess } from '../worker/worker-process.ts';
import { it } from './support/cleanup.ts';
import { lastToolResult, startFakeOpenAI } from './support/fake-openai.ts';
import { startFakeTelegram } from './support/fake-telegram.ts';
import { waitFor } from './support/http.ts';
import { ALLOWED_USER, telegramEnv } from './support/telegram-env.ts';

/** Ceiling of each wait: a tick on a loaded machine can be slow; none of these waits is a fixed sleep. */
const WAIT_MS = 45_000;
const TEST_MS = 120_000;

const exporter = new InMemorySpanExporter();
beforeAll(() => useTracing(otelTracing({ serviceName: 'hermes-test', processor: new SimpleSpanProcessor(exporter) })));
afterAll(async () => {
  const t = tracing();
  useTracing(NO_TRACING);
  await t.shutdown();
});

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const idOf = (s: ReadableSpan) => s.spanContext().spanId;
const traceOf = (s: ReadableSpan) => s.spanContext().traceId;
const inTrace = (traceId: string) => exporter.getFinishedSpans().filter((s) => traceOf(s) === traceId);
const named = (spans: ReadableSpan[], name: string) => spans.filter((s) => s.name === name);
const isOutboundJob = (s: ReadableSpan) => s.name === SPAN.job && s.attributes[ATTR.queue] === 'outbound-telegram';
/** The outbound job's span that sent the reply's parts, once it ended (a run that waited for an earlier reply of the chat sends none). */
const sendingJob = (traceId: string) => {
  const spans = inTrace(traceId);
  const part = named(spans, SPAN.deliveryPart)[0];
  return part && spans.find((s) => idOf(s) === parentOf(part) && isOutboundJob(s));
};
const ms = (t: [number, number]) => t[0] * 1000 + t[1] / 1e6;

/** A gateway polling the local Bot API, a worker and the model server; the worker's log lines in a file. */
async function stack(cleanups: Array<() => unknown>) {
  const fake = await startFakeTelegram();
  cleanups.push(() => fake.close());
  const model = await startFakeOpenAI({ usage: 'counted' });
  cleanups.push(() => model.close());
  const dir = mkdtempSync(join(tmpdir(), 'hermes-traces-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'build.txt'), 'BUILD STATUS: green\n');
  const env = telegramEnv(fake, {
    'agent.base_url': model.baseUrl,
    'agent.api_key': 'k',
    'agent.max_retries': 0,
    'tools.files.roots': [dir],
  });
  cleanups.push(() => env.cleanup());
  const logFile = join(dir, 'logs', 'worker.log');
  const worker = await WorkerProcess.start({
    config: env.config,
    redisUrl: env.redisUrl,
    log: createLogger({ level: 'debug', file: logFile }),
  });
  cleanups.push(() => worker.drain());
  const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: 'silent' }) });
  cleanups.push(() => gw.close());
  // Each turn reads the build file once, then answers with what it read.
  model.respond((req) => {
    const seen = lastToolResult(req);
    if (seen === undefined) return { toolCalls: [{ name: 'read_file', arguments: { path: 'build.txt' } }] };
    return seen.includes('green') ? 'all green' : 'not yet';
  });
  return { fake, logFile };
}

// One test at a time: the exporter is the process's, reset by each test.
describe.sequential('traces', () => {
  it(
    'a loop tick is one trace: job → occurrence → claim, turn (model, tool, model calls), commit, deliver → the send of each part',
    async ({ cleanups, expect }) => {
      exporter.reset();
      const { fake, logFile } = await stack(cleanups);
      fake.pushMessage({ fromId: ALLOWED_USER, text: '/loop 1h check the build' });
      const occurrence = await waitFor(
        () => exporter.getFinishedSpans().find((s) => s.name === SPAN.occurrence && s.attributes[ATTR.kind] === 'loop'),
        WAIT_MS,
        'the first tick',
      );
      const traceId = traceOf(occurrence);
      // The reply's parts are sent by the gateway in the same trace.
      const sent = await waitFor(() => sendingJob(traceId), WAIT_MS, 'the reply sent');
      expect(fake.sent.some((m) => m.text === 'all green')).toBe(true);
      const spans = inTrace(traceId);
      const one = (name: string, parent: ReadableSpan) => {
        const found = named(spans, name).filter((s) => parentOf(s) === idOf(parent));
        expect(found, `${name} under ${parent.name}`).toHaveLength(1);
        return found[0]!;
      };
      // The worker's job is the root: a tick starts its own trace.
      const [job] = named(spans, SPAN.job).filter((s) => parentOf(s) === undefined);
      expect(job!.attributes[ATTR.queue]).toBe('ticks');
      expect(parentOf(occurrence)).toBe(idOf(job!));
      const sessionId = `telegram:${fake.sent[0]!.chat_id}`;
      expect(occurrence.attributes).toMatchObject({
        [ATTR.sessionId]: sessionId,
        [ATTR.scheduleId]: expect.any(String),
        [ATTR.occurrenceId]: expect.stringContaining('loop'),
      });
      const claim = one(SPAN.claim, occurrence);
      const turn = one(SPAN.turn, occurrence);
      const commit = one(SPAN.commit, occurrence);
      const deliver = one(SPAN.deliver, occurrence);
      const calls = named(spans, SPAN.modelCall).sort((a, b) => ms(a.startTime) - ms(b.startTime));
      const tool = one(SPAN.toolCall, turn);
      expect(calls.map(parentOf)).toEqual([idOf(turn), idOf(turn)]);
      expect(tool.attributes[ATTR.tool]).toBe('read_file');
      for (const call of calls) {
        expect(call.attributes[ATTR.model]).toEqual(expect.any(String));
        expect(call.attributes[ATTR.inputTokens]).toBeGreaterThan(0);
        expect(call.attributes[ATTR.outputTokens]).toBeGreaterThan(0);
        expect(call.attributes[ATTR.durationMs]).toBeGreaterThanOrEqual(0);
      }
      // In the order of the pipeline: claim, turn (model call, tool call, model call), commit, deliver (the SDK's span
      // clocks agree to the millisecond).
      const inOrder = (spans: ReadableSpan[]) =>
        spans
          .slice(1)
          .forEach((s, i) => expect(ms(spans[i]!.endTime), `${spans[i]!.name} before ${s.name}`).toBeLessThanOrEqual(ms(s.startTime) + 1));
      inOrder([claim, turn, commit, deliver]);
      inOrder([calls[0]!, tool, calls[1]!]);
      // The gateway's send: its outbound job under the delivery, each part under that job.
      // (Its job may have run more than once: a run that finds an earlier reply of the chat unsent waits, deferred.)
      const outboundRuns = named(spans, SPAN.job).filter((s) => parentOf(s) === idOf(deliver));
      expect(outboundRuns.length).toBeGreaterThan(0);
      expect(outboundRuns.every(isOutboundJob)).toBe(true);
      expect(parentOf(sent)).toBe(idOf(deliver));
      expect(named(spans, SPAN.deliveryPart).every((p) => parentOf(p) === idOf(sent))).toBe(true);
      // One trace for the tick: none of its spans went to another.
      const elsewhere = exporter
        .getFinishedSpans()
        .filter((s) => traceOf(s) !== traceId && s.attributes[ATTR.occurrenceId] === occurrence.attributes[ATTR.occurrenceId]);
      expect(elsewhere).toEqual([]);
      // Log lines written during the tick carry its trace id.
      const lines = readFileSync(logFile, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.some((l) => l.trace_id === traceId && typeof l.span_id === 'string')).toBe(true);
      expect(lines.some((l) => l.msg === 'worker started' && l.trace_id === undefined)).toBe(true);
    },
    TEST_MS,
  );

  it(
    "a Telegram message is one trace: the gateway's receipt is the parent of the worker's job and turn, and of the reply's send",
    async ({ cleanups, expect }) => {
      exporter.reset();
      const { fake } = await stack(cleanups);
      fake.pushMessage({ fromId: ALLOWED_USER, text: 'is the build green?' });
      const receipt = await waitFor(
        () => exporter.getFinishedSpans().find((s) => s.name === SPAN.receive && s.attributes[ATTR.surface] === 'telegram'),
        WAIT_MS,
        "the gateway's receipt",
      );
      const traceId = traceOf(receipt);
      expect(parentOf(receipt)).toBeUndefined();
      const sent = await waitFor(() => sendingJob(traceId), WAIT_MS, 'the reply sent');
      const spans = inTrace(traceId);
      const [job] = named(spans, SPAN.job).filter((s) => s.attributes[ATTR.queue] === 'inbox');
      expect(parentOf(job!)).toBe(idOf(receipt));
      const [turn] = named(spans, SPAN.turn);
      expect(parentOf(turn!)).toBe(idOf(job!));
      expect(turn!.attributes[ATTR.sessionId]).toBe(receipt.attributes[ATTR.sessionId]);
      const calls = named(spans, SPAN.modelCall);
      expect(calls).toHaveLength(2);
      expect(calls.every((c) => parentOf(c) === idOf(turn!))).toBe(true);
      expect(named(spans, SPAN.toolCall).map(parentOf)).toEqual([idOf(turn!)]);
      expect([idOf(job!), idOf(turn!)]).toContain(parentOf(sent));
      expect(named(spans, SPAN.deliveryPart).every((p) => parentOf(p) === idOf(sent))).toBe(true);
      expect(fake.sent.at(-1)!.text).toBe('all green');
    },
    TEST_MS,
  );
});
