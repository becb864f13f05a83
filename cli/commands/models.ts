/**
 * `hermes models`: every model the agent may call, at its endpoint, with its context window and
 * where it comes from — configured, known by name, learned from a provider's refusal (how, when,
 * in whose words), or the default — and its circuit breaker (docs/CONTEXT.md). The rows are
 * `scheduler/models/model-catalog.ts`'s, the same as `GET /api/models`. Loaded only when `models` runs.
 */
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { modelCatalog, modelView } from '../../scheduler/models/model-catalog.ts';
import { modelStateFor } from '../../scheduler/services.ts';
import type { CliConnection } from '../cli-context.ts';
import { printOut } from '../terminal-text.ts';

/** Print the models (`--json`: `{ "object": "list", "data": [...] }`, as `/api/models`). */
export async function runModels(
  cfg: HermesConfig,
  conn: CliConnection,
  opts: { json?: boolean },
  out: (line: string) => void = printOut,
): Promise<void> {
  const now = Date.now();
  const views = modelCatalog(cfg, await modelStateFor(conn.redis, conn.keys).list()).map((row) => modelView(row, now));
  if (opts.json) {
    out(JSON.stringify({ object: 'list', data: views }, null, 2));
    return;
  }
  const n = (x: number | null) => (x === null ? '-' : x.toLocaleString('en-US'));
  const table = [
    ['NAME', 'MODEL', 'ENDPOINT', 'WINDOW', 'FROM', 'CONFIGURED', 'KNOWN', 'LEARNED', 'BREAKER'],
    ...views.map((v) => [
      v.name ?? '-',
      v.model,
      v.endpoint ?? '(none configured)',
      n(v.window_tokens),
      v.source,
      n(v.configured_tokens),
      n(v.known_tokens),
      n(v.learned?.tokens ?? null),
      v.breaker.state === 'closed'
        ? `closed${v.breaker.failures > 0 ? ` (${v.breaker.failures} failed)` : ''}`
        : `${v.breaker.state}, probes at ${v.breaker.probe_at} (${v.breaker.failures} failed)`,
    ]),
  ];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((r) => r[i]!.length)));
  for (const r of table) out(r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  '));
  const learned = views.filter((v) => v.learned);
  if (learned.length > 0) out('');
  for (const v of learned) {
    const l = v.learned!;
    const how = l.how === 'stated' ? `stated in a refusal (${l.provider})` : `halved after a refusal that named no window (${l.provider})`;
    out(`${v.model} at ${v.endpoint}: ${n(l.tokens)} tokens, ${how} at ${l.at}: "${l.said}"`);
  }
}
