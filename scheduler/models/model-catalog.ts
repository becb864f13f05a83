/**
 * Every model the agent may call, at its endpoint, with its window and where it comes from, and
 * its circuit breaker: what `hermes models` and `GET /api/models` show (docs/CONTEXT.md). The
 * configured models come first (the primary `agent.model`, then `agent.models` in order, then a
 * compaction model given as a raw id of the primary endpoint); then any endpoint and model the
 * fleet learned something about that the configuration no longer names.
 */
import type { HermesConfig } from '../config/config.ts';
import { ownValue } from '../names/name-table.ts';
import { breakerState, type BreakerRecord, type BreakerState } from './circuit-breaker.ts';
import { windowFromTable } from './known-windows.ts';
import { endpointOf, type ModelRef, type ModelState } from './model-state-store.ts';
import { resolveWindow, type LearnedWindow, type WindowSource } from './model-window.ts';

/** One model at one endpoint. */
export interface ModelRow {
  /** `agent.models` name; `primary` for `agent.model`; undefined for a model the configuration does not name. */
  name?: string;
  model: string;
  /** Undefined when no endpoint is configured (agent turns fail: no model). */
  endpoint?: string;
  windowTokens: number;
  source: WindowSource;
  configuredTokens?: number;
  knownTokens?: number;
  learned?: LearnedWindow;
  breaker?: BreakerRecord;
}

/** The rows of `config`'s models joined with what the fleet stored (`ModelStateStore.list`). */
export function modelCatalog(config: HermesConfig, stored: ReadonlyArray<ModelRef & ModelState>): ModelRow[] {
  const a = config.agent;
  const perModel: Record<string, number> = {};
  for (const m of Object.values(a.models)) if (m.context_window_tokens !== undefined) perModel[m.model] = m.context_window_tokens;
  const primaryEndpoint = endpointOf(a.base_url, a.api_key);
  const configured: Array<{ name?: string; model: string; endpoint?: string }> = [
    { name: 'primary', model: a.model, endpoint: primaryEndpoint },
    ...Object.entries(a.models).map(([name, m]) => ({
      name,
      model: m.model,
      endpoint: endpointOf(m.base_url ?? a.base_url, m.api_key ?? a.api_key),
    })),
    ...(a.compaction.model !== undefined && ownValue(a.models, a.compaction.model) === undefined
      ? [{ name: 'compaction', model: a.compaction.model, endpoint: primaryEndpoint }]
      : []),
  ];
  const byRef = new Map(stored.map((s) => [refId(s), s]));
  const seen = new Set<string>();
  const rows: ModelRow[] = [];
  const add = (name: string | undefined, ref: { model: string; endpoint?: string }, configuredTokens: number | undefined) => {
    const s = ref.endpoint !== undefined ? byRef.get(refId({ endpoint: ref.endpoint, model: ref.model })) : undefined;
    const window = resolveWindow({ model: ref.model, learned: s?.window, configuredTokens });
    const known = windowFromTable(ref.model);
    rows.push({
      ...(name !== undefined ? { name } : {}),
      model: ref.model,
      ...(ref.endpoint !== undefined ? { endpoint: ref.endpoint } : {}),
      windowTokens: window.tokens,
      source: window.source,
      ...(configuredTokens !== undefined ? { configuredTokens } : {}),
      ...(known !== undefined ? { knownTokens: known } : {}),
      ...(s?.window ? { learned: s.window } : {}),
      ...(s?.breaker ? { breaker: s.breaker } : {}),
    });
  };
  for (const c of configured) {
    const id = refId({ endpoint: c.endpoint ?? '', model: c.model });
    if (seen.has(id)) continue;
    seen.add(id);
    add(c.name, c, ownValue(perModel, c.model) ?? a.context_window_tokens);
  }
  for (const s of stored) if (!seen.has(refId(s))) add(undefined, s, undefined);
  return rows;
}

/** A row as `/api/models` and `hermes models --json` give it (snake_case, times as ISO 8601). */
export function modelView(row: ModelRow, now: number) {
  const state: BreakerState = breakerState(row.breaker, now);
  return {
    name: row.name ?? null,
    model: row.model,
    endpoint: row.endpoint ?? null,
    window_tokens: row.windowTokens,
    source: row.source,
    configured_tokens: row.configuredTokens ?? null,
    known_tokens: row.knownTokens ?? null,
    learned: row.learned
      ? {
          tokens: row.learned.tokens,
          how: row.learned.how,
          provider: row.learned.provider,
          at: new Date(row.learned.at).toISOString(),
          said: row.learned.said,
        }
      : null,
    breaker: {
      state,
      failures: row.breaker?.failures ?? 0,
      probe_at: state === 'closed' ? null : new Date(Math.max(row.breaker!.openUntil!, row.breaker!.probeUntil ?? 0)).toISOString(),
      last_error: row.breaker?.lastError ?? null,
    },
  };
}

const refId = (ref: ModelRef) => JSON.stringify([ref.endpoint, ref.model]);
