/**
 * Drain of the gateway (docs/DESIGN.md §9).
 *
 * The gateway runs no turns itself; what it holds in flight are `/v1` callers
 * waiting for runs that workers execute. On SIGTERM/SIGINT it stops taking new
 * work (Telegram polling stops, new `/v1` and `/api` requests get 503) and lets
 * the waiting callers finish within `agent.cron_drain_timeout`: `/v1` runs get
 * the cron budget, not the chat budget, because a run cannot be resumed — it
 * has a caller blocked on it (the old system killed them after 0.00 s because
 * `restart_drain_timeout` defaults to 0). `cron_drain_timeout: 0` opts them out:
 * callers get the 503 at once. After the deadline every remaining wait is
 * aborted through its AbortSignal and the caller gets a 503, never a hang.
 */
import type { Logger } from 'pino';

/** The reason a wait was aborted by the drain (the signal's `reason`). */
export class DrainAbort extends Error {
  constructor() {
    super('The gateway is shutting down.');
    this.name = 'DrainAbort';
  }
}

interface Waiter {
  runId: string;
  controller: AbortController;
  done: Promise<void>;
}

/** `/v1` callers waiting for their runs, and the drain of them. */
export class InflightRuns {
  private readonly waiters = new Set<Waiter>();
  private drainPromise: Promise<void> | undefined;
  private drainingFlag = false;

  /** True once a drain started: routes refuse new `/v1` work with a 503. */
  get draining(): boolean {
    return this.drainingFlag;
  }

  /** Callers waiting right now. */
  get size(): number {
    return this.waiters.size;
  }

  /**
   * Run a caller's wait for `runId` under drain control.
   * `fn` gets a signal that is aborted (reason `DrainAbort`) at the drain deadline.
   */
  async track<T>(runId: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    let finish!: () => void;
    const waiter: Waiter = { runId, controller, done: new Promise<void>((r) => (finish = r)) };
    this.waiters.add(waiter);
    try {
      return await fn(controller.signal);
    } finally {
      this.waiters.delete(waiter);
      finish();
    }
  }

  /**
   * Stop taking new `/v1` work and wait for the waiting callers up to
   * `timeoutSeconds` (`agent.cron_drain_timeout`); then abort the rest.
   * Memoised: a second call returns the first call's promise.
   * @returns resolves when no caller waits any more (each got its answer or its 503)
   */
  drain(timeoutSeconds: number, log: Logger): Promise<void> {
    this.drainPromise ??= (async () => {
      this.drainingFlag = true;
      const waiting = [...this.waiters];
      if (waiting.length === 0) {
        log.info('drain: no /v1 runs in flight');
        return;
      }
      if (timeoutSeconds <= 0) {
        log.warn({ runs: waiting.length }, `drain: cron_drain_timeout is 0; interrupting ${waiting.length} /v1 run(s) now`);
      } else {
        log.info({ runs: waiting.length, timeoutSeconds }, `drain: waiting up to ${timeoutSeconds}s for ${waiting.length} /v1 run(s)`);
        const started = Date.now();
        let timer: NodeJS.Timeout | undefined;
        const deadline = new Promise<'deadline'>((r) => (timer = setTimeout(() => r('deadline'), timeoutSeconds * 1000)));
        const all = Promise.all(waiting.map((w) => w.done)).then(() => 'done' as const);
        const outcome = await Promise.race([all, deadline]);
        clearTimeout(timer);
        if (outcome === 'done') {
          log.info({ ms: Date.now() - started }, 'drain: all /v1 runs finished');
          return;
        }
      }
      const left = [...this.waiters];
      if (left.length > 0) {
        log.warn({ runs: left.length, runIds: left.map((w) => w.runId) }, `drain: aborting ${left.length} /v1 run wait(s)`);
      }
      for (const w of left) w.controller.abort(new DrainAbort());
      await Promise.all(left.map((w) => w.done));
    })();
    return this.drainPromise;
  }
}
