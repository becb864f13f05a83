/**
 * The OpenTelemetry side of `tracing.ts`: a tracer provider of this process's own, its context kept by
 * an `AsyncLocalStorage` manager of its own (nothing is registered globally, so no other library's
 * instrumentation starts reporting through it), W3C Trace Context in the carriers of jobs' data.
 * Loaded only when tracing is on (`start-tracing.ts`); tests load it with an in-memory exporter.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  defaultTextMapGetter,
  defaultTextMapSetter,
  trace,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { SPAN, type ActiveSpan, type SpanAttributes, type TraceCarrier, type TraceLogFields, type Tracing } from './tracing.ts';

/** Spans that are calls to another service (the model endpoint, a platform). */
const CLIENT_SPANS: ReadonlySet<string> = new Set([SPAN.modelCall, SPAN.deliveryPart]);

/** An error that moves a job back to delayed (BullMQ's `DelayedError`): a hand-back, not a failure. */
const HANDED_BACK = 'DelayedError';

/**
 * Tracing that sends its spans to `processor`.
 * @param options.serviceName - the resource's `service.name`
 * @param options.processor - where ended spans go (a batch to the OTLP exporter; in tests a simple processor to memory)
 */
export function otelTracing(options: { serviceName: string; processor: SpanProcessor }): Tracing {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: options.serviceName }),
    spanProcessors: [options.processor],
  });
  const tracer = provider.getTracer('hermes-scheduler');
  const contexts = new AsyncLocalStorageContextManager().enable();
  const propagator = new W3CTraceContextPropagator();

  const inSpan = async <T>(span: Span, parent: Context, fn: (span: ActiveSpan) => Promise<T>): Promise<T> => {
    const active: ActiveSpan = { set: (attributes) => span.setAttributes(defined(attributes)) };
    try {
      return await contexts.with(trace.setSpan(parent, span), () => fn(active));
    } catch (err) {
      if (!(err instanceof Error && err.name === HANDED_BACK)) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
      }
      throw err;
    } finally {
      span.end();
    }
  };

  return {
    enabled: true,
    span(name, attributes, fn) {
      const parent = contexts.active();
      const kind = CLIENT_SPANS.has(name) ? SpanKind.CLIENT : SpanKind.INTERNAL;
      return inSpan(tracer.startSpan(name, { kind, attributes: defined(attributes) }, parent), parent, fn);
    },
    continued(name, carrier, attributes, fn) {
      const parent = carrier ? propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter) : ROOT_CONTEXT;
      return inSpan(tracer.startSpan(name, { kind: SpanKind.CONSUMER, attributes: defined(attributes) }, parent), parent, fn);
    },
    carrier() {
      const active = contexts.active();
      if (!trace.getSpan(active)) return undefined;
      const carrier: Record<string, string> = {};
      propagator.inject(active, carrier, defaultTextMapSetter);
      return carrier.traceparent ? (carrier as unknown as TraceCarrier) : undefined;
    },
    logFields(): TraceLogFields | undefined {
      const span = trace.getSpan(contexts.active());
      if (!span) return undefined;
      const { traceId, spanId } = span.spanContext();
      return { trace_id: traceId, span_id: spanId };
    },
    async shutdown() {
      contexts.disable();
      await provider.shutdown();
    },
  };
}

/**
 * The processor that sends batches of spans to an OTLP/HTTP collector (JSON over HTTP; headers from
 * `OTEL_EXPORTER_OTLP_HEADERS`, as the exporter reads them).
 * @param tracesUrl - the collector's traces address (`…/v1/traces`)
 */
export function otlpProcessor(tracesUrl: string): SpanProcessor {
  return new BatchSpanProcessor(new OTLPTraceExporter({ url: tracesUrl }));
}

/** `attributes` without its undefined values. */
function defined(attributes: SpanAttributes): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(attributes)) if (v !== undefined) out[k] = v;
  return out;
}
