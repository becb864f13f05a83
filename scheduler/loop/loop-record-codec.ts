/**
 * The stored form of a loop or heartbeat record (one JSON string per session
 * and kind, `Keys.schedule`).
 *
 * Compact form (what is written): the JSON of the record without what the
 * key already says and without fields at their default —
 * - `kind` and `sessionId` are omitted: the key `…:schedule:<kind>:<session>`
 *   names them, and every reader reads a record through its key;
 * - a field whose value is `null` is omitted (`until`, `lastTickStartedAt`, …);
 * - the counters `ticksUsed`, `judgeFailures`, `failureStreak` and the budget
 *   `maxTicks` are omitted when 0, `runner` when it is `{"kind":"agent"}`,
 *   `origin` when it is `{"surface":"cli"}`, `mode` when `fixed` and `status`
 *   when `active`;
 * - `updatedAt` is omitted while it equals `createdAt`.
 * Every other field is written under its own name, so the stored record stays
 * readable with `redis-cli GET`. `version` (the compare-and-set counter the
 * Lua scripts read with `cjson`) is always written.
 *
 * Reading accepts both forms: the full form of earlier versions (every field,
 * nulls included, `kind` and `sessionId` inside) decodes to the same record,
 * so a stored record needs no migration; it is written compact at its next
 * change. The compact form needs readers of this version: an earlier worker
 * or gateway would read the omitted fields as missing, so the processes that
 * share a Redis are upgraded together (docs/OPERATIONS.md).
 *
 * Why: a stored loop's Redis memory (docs/BENCHMARKS.md, scale): the full form
 * of a new loop is ~550 bytes of JSON, the compact form ~170.
 */
import type { LoopKind } from '../tick/tick-kind.ts';
import type { LoopRecord } from './loop-state.ts';

/** Fields omitted when at these values, and restored to them on reading. */
const DEFAULTS = {
  mode: 'fixed',
  status: 'active',
  origin: { surface: 'cli' },
  intervalSeconds: null,
  delaySeconds: null,
  times: null,
  until: null,
  statusReason: null,
  ticksUsed: 0,
  maxTicks: 0,
  runner: { kind: 'agent' },
  lastTickDueAt: null,
  lastTickStartedAt: null,
  lastTickFinishedAt: null,
  lastOccurrenceId: null,
  lastDigest: null,
  nextDueAt: null,
  judgeFailures: 0,
  failureStreak: 0,
  lastError: null,
  failingSince: null,
} as const satisfies Partial<LoopRecord>;

/** Fields the key names (never stored in the compact form). */
const FROM_KEY = new Set(['kind', 'sessionId']);

function isDefault(field: string, value: unknown): boolean {
  if (value === null || value === undefined) return true;
  if (!(field in DEFAULTS)) return false;
  const def = DEFAULTS[field as keyof typeof DEFAULTS];
  return typeof def === 'object' && def !== null ? JSON.stringify(value) === JSON.stringify(def) : value === def;
}

/**
 * The compact stored form of `record` (see the top of this file).
 * @returns JSON text of an object with `version` and the non-default fields
 */
export function encodeLoopRecord(record: LoopRecord): string {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(record)) {
    if (FROM_KEY.has(field) || (field !== 'version' && isDefault(field, value))) continue;
    if (field === 'updatedAt' && value === record.createdAt) continue;
    out[field] = value;
  }
  return JSON.stringify(out);
}

/**
 * The record stored at the key of `identity`, from either stored form.
 * @param raw - the stored JSON text (compact or the earlier full form)
 * @param identity - the session and kind the key was built from (they win over stored copies)
 * @throws SyntaxError when `raw` is not JSON
 */
export function decodeLoopRecord(raw: string, identity: { sessionId: string; kind: LoopKind }): LoopRecord {
  const stored = JSON.parse(raw) as Partial<LoopRecord>;
  const record: Record<string, unknown> = { kind: identity.kind, sessionId: identity.sessionId };
  for (const [field, def] of Object.entries(DEFAULTS)) record[field] = typeof def === 'object' && def !== null ? { ...def } : def;
  for (const [field, value] of Object.entries(stored)) {
    if (FROM_KEY.has(field) || value === null || value === undefined) continue;
    record[field] = value;
  }
  record.updatedAt ??= record.createdAt;
  return record as unknown as LoopRecord;
}
