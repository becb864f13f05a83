/**
 * Turning tracing on for a process: with `telemetry.otlp_endpoint` set (or `OTEL_EXPORTER_OTLP_ENDPOINT`),
 * the OpenTelemetry SDK is imported here, on demand, and installed as the process's tracing; without
 * it nothing is imported and the no-op tracing stays. A worker and a gateway in one process (`hermes up`)
 * share one installation; the last to stop flushes it.
 */
import { NO_TRACING, tracing, useTracing, type Tracing } from './tracing.ts';

/** What tracing reads of the configuration (`telemetry` in scheduler/config/config.ts). */
export interface TelemetryConfig {
  /** Base address of an OTLP/HTTP collector; spans go to `<it>/v1/traces`. Unset: tracing off. */
  otlp_endpoint?: string | undefined;
  /** The `service.name` of the spans. */
  service_name: string;
}

let installed: { tracing: Tracing; users: number } | undefined;

/**
 * Install tracing for `config`, or share the installation a process part made already.
 * @returns what stops it: resolves once this user is done, and, for the last one, once buffered spans were sent
 */
export async function startTracing(config: TelemetryConfig): Promise<() => Promise<void>> {
  if (!config.otlp_endpoint) return async () => {};
  if (!installed) {
    const { otelTracing, otlpProcessor } = await import('./otel-tracing.ts');
    const t = otelTracing({ serviceName: config.service_name, processor: otlpProcessor(tracesUrl(config.otlp_endpoint)) });
    installed = { tracing: t, users: 0 };
    useTracing(t);
  }
  const mine = installed;
  mine.users++;
  let stopped = false;
  return async () => {
    if (stopped) return;
    stopped = true;
    if (--mine.users > 0) return;
    if (installed === mine) installed = undefined;
    if (tracing() === mine.tracing) useTracing(NO_TRACING);
    await mine.tracing.shutdown();
  };
}

/** The traces address of an OTLP/HTTP base address (the `OTEL_EXPORTER_OTLP_ENDPOINT` rule: `/v1/traces` appended). */
export function tracesUrl(endpoint: string): string {
  return `${endpoint.replace(/\/+$/, '')}/v1/traces`;
}
