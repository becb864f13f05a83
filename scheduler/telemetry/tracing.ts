/**
 * Traces of a tick across its processes (docs/OPERATIONS.md, "Traces"): the one surface the rest of the
 * code traces through. It holds no OpenTelemetry import: with tracing off (no `telemetry.otlp_endpoint`)
 * the process runs the no-op tracing below and never loads the SDK (`start-tracing.ts` imports it on
 * demand), so a command that does not trace pays nothing for it.
 *
 * One trace per occurrence or inbound message: a worker's job span is the root of a tick's trace; the
 * gateway's receipt of a message is the root of its trace, and the worker's job continues it through
 * the context put into the job's data ({@link TraceCarrier}); a reply's outbound job carries it on to
 * the gateway's send of each part.
 */

/** Values a span attribute may take; `undefined` ones are left out. */
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

/** A trace context in a job's data (W3C Trace Context), so another process continues the trace. */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}

/** The span a traced function runs in. */
export interface ActiveSpan {
  /** Add attributes (a model call's tokens, once it answered). */
  set(attributes: SpanAttributes): void;
}

/** The ids a log line carries while a span is active (pino's `mixin`). */
export interface TraceLogFields {
  trace_id: string;
  span_id: string;
}

/** Tracing as the code sees it; {@link NO_TRACING} when off. */
export interface Tracing {
  /** Spans are recorded and exported. */
  readonly enabled: boolean;
  /**
   * Run `fn` in a new span, a child of the active span (a root when none is active). A throw ends the span
   * with an error status (its message only) and is thrown on.
   */
  span<T>(name: string, attributes: SpanAttributes, fn: (span: ActiveSpan) => Promise<T>): Promise<T>;
  /**
   * Run `fn` in a new span continuing the trace `carrier` names (its parent), else in a new trace: the
   * root of a job's trace in the process that runs it.
   */
  continued<T>(
    name: string,
    carrier: TraceCarrier | undefined,
    attributes: SpanAttributes,
    fn: (span: ActiveSpan) => Promise<T>,
  ): Promise<T>;
  /** The active span's context, to put into a job's data; undefined when none is active. */
  carrier(): TraceCarrier | undefined;
  /** The active span's ids for a log line; undefined when none is active. */
  logFields(): TraceLogFields | undefined;
  /** Export what is still buffered and stop. */
  shutdown(): Promise<void>;
}

const NO_SPAN: ActiveSpan = { set() {} };

/** Tracing off: every span is the function alone. */
export const NO_TRACING: Tracing = {
  enabled: false,
  span: (_name, _attributes, fn) => fn(NO_SPAN),
  continued: (_name, _carrier, _attributes, fn) => fn(NO_SPAN),
  carrier: () => undefined,
  logFields: () => undefined,
  shutdown: async () => {},
};

/** Span names, one per step of a tick's path (what an operator filters on). */
export const SPAN = {
  /** The gateway stored an inbound message and queued it (the root of its trace). */
  receive: 'message.receive',
  /** A worker runs one job of a queue (`job <queue>`). */
  job: 'job',
  /** One occurrence of a schedule through the pipeline (worker/occurrence/pipeline.ts). */
  occurrence: 'occurrence',
  claim: 'claim',
  turn: 'turn',
  modelCall: 'model.call',
  toolCall: 'tool.call',
  commit: 'commit',
  deliver: 'deliver',
  /** The gateway sends one part of a reply to a platform. */
  deliveryPart: 'send.part',
} as const;

/** Attribute names of the product's ids and a model call's figures. */
export const ATTR = {
  sessionId: 'hermes.session.id',
  scheduleId: 'hermes.schedule.id',
  occurrenceId: 'hermes.occurrence.id',
  kind: 'hermes.occurrence.kind',
  surface: 'hermes.surface',
  jobId: 'messaging.message.id',
  queue: 'messaging.destination.name',
  model: 'gen_ai.request.model',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  durationMs: 'hermes.duration_ms',
  tool: 'gen_ai.tool.name',
  platform: 'hermes.platform',
  part: 'hermes.delivery.part',
} as const;

let current: Tracing = NO_TRACING;

/** The process's tracing ({@link NO_TRACING} until `startTracing` installs one). */
export function tracing(): Tracing {
  return current;
}

/** Install `t` as the process's tracing (`start-tracing.ts`; tests with their own exporter). Internal. */
export function useTracing(t: Tracing): void {
  current = t;
}

/** The trace context a job's data carries, if any. */
export function carrierOf(data: unknown): TraceCarrier | undefined {
  const trace = (data as { trace?: unknown } | null | undefined)?.trace;
  if (typeof trace !== 'object' || trace === null) return undefined;
  const { traceparent, tracestate } = trace as Record<string, unknown>;
  if (typeof traceparent !== 'string') return undefined;
  return typeof tracestate === 'string' ? { traceparent, tracestate } : { traceparent };
}
