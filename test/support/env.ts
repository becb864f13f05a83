/**
 * Per-test isolation on the shared test Redis: a unique hash-tag prefix, a
 * temporary HERMES_HOME and a config built for tests.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import { loadConfig, type HermesConfig } from '../../scheduler/config/config.ts';

/** The job lock of tests not about a lock lapsing, in ms (the product's is 3,000: `scheduler/config/config.ts`). */
export const TEST_LOCK_MS = 10_000;

/**
 * For tests about a lock lapsing — a worker killed, stopped or cut off, and another taking its job over:
 * the product's `worker.lock_duration_ms`, so a takeover comes as soon as it does in production.
 * `testEnv({ ...PRODUCT_LOCK, … })`.
 */
export const PRODUCT_LOCK: Readonly<Record<string, unknown>> = { 'worker.lock_duration_ms': undefined };

/** A fresh test environment. `cleanup()` removes the home folder. */
export interface TestEnv {
  redisUrl: string;
  prefix: string;
  home: string;
  config: HermesConfig;
  /** Environment for child processes (`hermes worker`) of this test. */
  childEnv: NodeJS.ProcessEnv;
  cleanup(): void;
}

/** Where `testEnv` lists the overrides a child process cannot be given through its environment. */
const NOT_FOR_CHILDREN = 'HERMES_TEST_NOT_FOR_CHILDREN';

/**
 * Refuse to start a `hermes worker` child on an environment that lacks overrides the test set in
 * process: its turns would run on other settings than the test believes (write them to the home's
 * `config.yaml` instead). A CLI child is not refused: what it is asked rarely reads them.
 * @throws Error naming them
 */
export function assertChildEnv(env: NodeJS.ProcessEnv): void {
  const missing = env[NOT_FOR_CHILDREN];
  if (missing)
    throw new Error(`testEnv overrides ${missing} cannot reach a child process through its environment; write them to config.yaml`);
}

/**
 * Build a test environment.
 * @param overrides - config overrides by dotted key, e.g. `{ 'loops.min_interval_seconds': 1 }`;
 *   `undefined` drops a test setting, so the product default of `scheduler/config/config.ts` applies
 *   (in-process and in child processes alike)
 */
export function testEnv(overrides: Record<string, unknown> = {}): TestEnv {
  const redisUrl = inject('redisUrl');
  const prefix = `{t-${randomBytes(5).toString('hex')}}`;
  const home = mkdtempSync(join(tmpdir(), 'hermes-test-home-'));
  const base: Record<string, unknown> = {
    'redis.url': redisUrl,
    'redis.prefix': prefix,
    log_level: process.env.HERMES_TEST_LOG ?? 'silent',
    'loops.min_interval_seconds': 1,
    // A job lock that survives a starved process: on a busy machine (the suite beside two copies of itself,
    // load 30+ on 2 cores) a live worker's renewal can come seconds late, and under the product's 3 s lock
    // its turn is fenced off and run again, which tests about anything else read as a failure. Tests about
    // a lock lapsing (a worker killed, stopped or cut off) take the product's lock: `PRODUCT_LOCK`.
    'worker.lock_duration_ms': TEST_LOCK_MS,
    'worker.stalled_interval_ms': 1000,
    'worker.defer_ms': 100,
    // Likewise the gateway's wait on one Redis command: beside two copies of the suite one took over the
    // product's 2 s and the request was answered 503, which tests about anything else read as a failure.
    'gateway.redis_timeout_ms': 30_000,
    // A failing model fails at once unless a test is about retries (it then sets its own), and keeps
    // being called unless a test is about the circuit breaker (likewise).
    'agent.max_retries': 0,
    'agent.breaker_failure_threshold': 0,
    // A failed tick is tried again after 1 s and the count alone pauses, unless a test is about
    // the back-off (the product waits 30 s doubling to 15 min and pauses only after 15 min).
    'loops.failure_backoff_seconds': 1,
    'loops.failure_backoff_max_seconds': 1,
    'loops.failure_pause_after_seconds': 0,
    ...overrides,
  };
  for (const [k, v] of Object.entries(base)) if (v === undefined) delete base[k];
  const env = { HERMES_HOME: home };
  const config = loadConfig({ env, overrides: base });
  const childEnv: NodeJS.ProcessEnv = {
    ...process.env,
    HERMES_HOME: home,
    REDIS_URL: redisUrl,
    HERMES_REDIS_PREFIX: prefix,
    HERMES_LOG_LEVEL: String(base.log_level),
  };
  for (const [k, v] of Object.entries(base)) {
    if (k === 'redis.url' || k === 'redis.prefix' || k === 'log_level') continue;
    // An environment variable holds `<section>.<key>` with a text (a list as a comma list); anything else
    // cannot reach a child process that way, and a worker child started without it is refused (`assertChildEnv`).
    if (k.split('.').length !== 2 || (typeof v === 'object' && v !== null && !Array.isArray(v))) {
      childEnv[NOT_FOR_CHILDREN] = [childEnv[NOT_FOR_CHILDREN], k].filter(Boolean).join(',');
      continue;
    }
    childEnv[`HERMES_${k.replace('.', '_').toUpperCase()}`] = String(v);
  }
  return { redisUrl, prefix, home, config, childEnv, cleanup: () => rmSync(home, { recursive: true, force: true }) };
}
