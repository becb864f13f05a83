/**
 * Traces over OTLP (docs/OPERATIONS.md, "Traces"): a worker whose `telemetry.otlp_endpoint` names a collector
 * sends a tick's trace to `<endpoint>/v1/traces` — here a local OTLP/HTTP receiver (express) that keeps what
 * the exporter posts, as JSON. Real Redis, a real worker, the real `openai` client against the local model
 * server; nothing of the SDK is stubbed.
 */
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { describe } from 'vitest';
import type { LoopSpec } from '../scheduler/loop/loop-service.ts';
import { ATTR, SPAN, tracing } from '../scheduler/telemetry/tracing.ts';
import { startAgentStack } from './support/agent-stack.ts';
import { it } from './support/cleanup.ts';
import { lastToolResult } from './support/fake-openai.ts';
import { waitFor } from './support/stack.ts';

const WAIT_MS = 45_000;

/** A span as OTLP/JSON writes it (the fields read here). */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: Array<{ key: string; value: { stringValue?: string; intValue?: string | number } }>;
}

/** An OTLP/HTTP receiver of traces: what each POST /v1/traces carried, with its service name. */
async function startReceiver() {
  const spans: Array<OtlpSpan & { service: string }> = [];
  const contentTypes: string[] = [];
  const app = express();
  app.post('/v1/traces', express.json({ limit: '10mb' }), (req, res) => {
    contentTypes.push(String(req.headers['content-type']));
    const body = req.body as {
      resourceSpans?: Array<{
        resource?: { attributes?: Array<{ key: string; value: { stringValue?: string } }> };
        scopeSpans?: Array<{ spans?: OtlpSpan[] }>;
      }>;
    };
    for (const rs of body.resourceSpans ?? []) {
      const service = rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
      for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) spans.push({ ...s, service });
    }
    res.status(200).json({});
  });
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, spans, contentTypes, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const attr = (s: OtlpSpan, key: string) => s.attributes?.find((a) => a.key === key)?.value.stringValue;
const loop: LoopSpec = { prompt: 'check the build', intervalSeconds: 3600, times: 1, until: null, notes: [], economy: {} };

describe('traces over OTLP', () => {
  it("with telemetry.otlp_endpoint set, a tick's trace reaches the OTLP/HTTP receiver at <endpoint>/v1/traces", async ({
    cleanups,
    expect,
  }) => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    // The batch goes out 100 ms after the spans end instead of the SDK's 5 s (OTEL_BSP_SCHEDULE_DELAY, read when the
    // worker's processor is made): the same batching exporter, without five seconds of waiting for it.
    const delay = process.env.OTEL_BSP_SCHEDULE_DELAY;
    process.env.OTEL_BSP_SCHEDULE_DELAY = '100';
    cleanups.push(() => {
      if (delay === undefined) delete process.env.OTEL_BSP_SCHEDULE_DELAY;
      else process.env.OTEL_BSP_SCHEDULE_DELAY = delay;
    });
    const { c, model, dir } = await startAgentStack(cleanups, {
      'telemetry.otlp_endpoint': `${receiver.url}/`,
      'telemetry.service_name': 'hermes-otlp-test',
    });
    expect(tracing().enabled).toBe(true);
    writeFileSync(join(dir, 'build.txt'), 'BUILD STATUS: green\n');
    model.respond((req) =>
      lastToolResult(req) === undefined ? { toolCalls: [{ name: 'read_file', arguments: { path: 'build.txt' } }] } : 'all green',
    );
    await c.schedules.set('otlp', 'loop', loop, { origin: { surface: 'cli' }, runner: { kind: 'agent' } });
    // Batched: the exporter posts within its delay of the spans' end.
    const occurrence = await waitFor(
      () => receiver.spans.find((s) => s.name === SPAN.occurrence && attr(s, ATTR.sessionId) === 'otlp'),
      WAIT_MS,
      "the tick's occurrence span at the receiver",
    );
    const trace = await waitFor(
      () => {
        const t = receiver.spans.filter((s) => s.traceId === occurrence.traceId);
        return [SPAN.job, SPAN.claim, SPAN.turn, SPAN.modelCall, SPAN.toolCall, SPAN.commit, SPAN.deliver].every((n) =>
          t.some((s) => s.name === n),
        )
          ? t
          : undefined;
      },
      WAIT_MS,
      'every span of the tick at the receiver',
    );
    expect(receiver.contentTypes.every((t) => t.startsWith('application/json'))).toBe(true);
    expect(trace.every((s) => s.service === 'hermes-otlp-test')).toBe(true);
    const job = trace.find((s) => s.name === SPAN.job)!;
    expect(job.parentSpanId ?? '').toBe('');
    expect(occurrence.parentSpanId).toBe(job.spanId);
    const turn = trace.find((s) => s.name === SPAN.turn)!;
    expect(trace.filter((s) => s.name === SPAN.modelCall).every((s) => s.parentSpanId === turn.spanId)).toBe(true);
    // The worker's drain sends what is left and uninstalls the tracing.
  });
});
