/**
 * The circuit breaker of one endpoint and model, as pure transitions over its stored record
 * (docs/CONTEXT.md "Circuit breaker"; the record is shared by every worker: `model-state-store.ts`).
 *
 * - **Closed**: calls go to the model. Each call that fails for good (a transient error after the
 *   client's retries: 429, 5xx, connection, timeout) counts one failure; a call that answers
 *   resets the count.
 * - **Open**: after `failureThreshold` failures in a row (`agent.breaker_failure_threshold`)
 *   the breaker opens for `cooldownMs` (`agent.breaker_cooldown_seconds`): calls skip the model and go straight
 *   to the fallback models, paying none of its retries; with no fallback the call fails at once,
 *   naming the breaker and when it probes.
 * - **Probe**: after the cool-down one call, fleet-wide, is let through (the probe; the others keep
 *   skipping while it runs, at most `probeLeaseMs`). Its answer closes the breaker; its failure
 *   opens it for another cool-down.
 */

/** A breaker's stored record. */
export interface BreakerRecord {
  /** Record version (`putVersioned`). */
  version: number;
  /** Calls in a row that failed for good. */
  failures: number;
  /** While set and in the future: open until then (epoch ms); in the past: a probe may go. */
  openUntil?: number;
  /** A probe call is under way until then (epoch ms). */
  probeUntil?: number;
  /** When it last opened (epoch ms). */
  openedAt?: number;
  /** The error of the last failed call. */
  lastError?: string;
}

/** The breaker's settings. */
export interface BreakerSettings {
  /** Failures in a row that open it; 0 = no breaker. */
  failureThreshold: number;
  cooldownMs: number;
  /** Longest a probe keeps the others skipping (the call's own time limit). */
  probeLeaseMs: number;
}

/** What a call may do: go (`probe` when it is the one call after a cool-down), or skip the model. */
export type Admission =
  | { kind: 'call' }
  | { kind: 'probe' }
  | {
      kind: 'skip';
      /** When the next probe may go (epoch ms). */
      probeAt: number;
      failures: number;
      lastError?: string;
    };

/** What a breaker's state is at `now`, for listings and the gauge. */
export type BreakerState = 'closed' | 'open' | 'probing';

export function breakerState(record: BreakerRecord | undefined, now: number): BreakerState {
  if (record?.openUntil === undefined) return 'closed';
  if (record.probeUntil !== undefined && record.probeUntil > now) return 'probing';
  return 'open';
}

/**
 * Whether a call may go at `now`.
 * @returns the admission, and the record to write when the call takes the probe (else undefined)
 */
export function admit(
  record: BreakerRecord | undefined,
  now: number,
  settings: BreakerSettings,
): { admission: Admission; next?: BreakerRecord } {
  if (settings.failureThreshold <= 0 || record?.openUntil === undefined) return { admission: { kind: 'call' } };
  const skip = (probeAt: number): { admission: Admission } => ({
    admission: { kind: 'skip', probeAt, failures: record.failures, ...(record.lastError ? { lastError: record.lastError } : {}) },
  });
  if (now < record.openUntil) return skip(record.openUntil);
  if (record.probeUntil !== undefined && now < record.probeUntil) return skip(record.probeUntil);
  return { admission: { kind: 'probe' }, next: { ...record, probeUntil: now + settings.probeLeaseMs } };
}

/**
 * The record after a call at `now` answered (`ok`) or failed for good (`failed`).
 * @returns the record to write (undefined: nothing changes) and whether this outcome opened the breaker
 */
export function afterCall(
  record: BreakerRecord | undefined,
  outcome: { ok: true } | { ok: false; error: string },
  now: number,
  settings: BreakerSettings,
): { next?: BreakerRecord; opened: boolean; closed: boolean } {
  if (settings.failureThreshold <= 0) return { opened: false, closed: false };
  if (outcome.ok) {
    if (!record || (record.failures === 0 && record.openUntil === undefined)) return { opened: false, closed: false };
    return { next: { version: record.version, failures: 0 }, opened: false, closed: record.openUntil !== undefined };
  }
  const failures = (record?.failures ?? 0) + 1;
  const base = { version: record?.version ?? 0, failures, lastError: outcome.error.slice(0, 300) };
  const isOpen = record?.openUntil !== undefined;
  // A failed probe, or the failure that reaches the threshold, opens it (again) for a cool-down.
  const probeFailed = isOpen && record.probeUntil !== undefined && now >= record.openUntil!;
  if (probeFailed || (!isOpen && failures >= settings.failureThreshold)) {
    return { next: { ...base, openUntil: now + settings.cooldownMs, openedAt: now }, opened: true, closed: false };
  }
  // A call let through before the breaker opened may still fail while it is open: counted, nothing more.
  return {
    next: { ...base, ...(isOpen ? { openUntil: record.openUntil, openedAt: record.openedAt, probeUntil: record.probeUntil } : {}) },
    opened: false,
    closed: false,
  };
}
