/**
 * SIGTERM/SIGINT handling of a gateway process (docs/DESIGN.md §9): the first signal
 * drains (stop taking work, let `/v1` runs finish within
 * `agent.cron_drain_timeout`), closes and exits 0; a second signal exits 1 at once.
 */
import type { Logger } from 'pino';
import type { Gateway } from './gateway-process.ts';

/**
 * Install the handlers. `exit` is `process.exit` unless given.
 * @returns a function removing the handlers
 */
export function drainOnSignals(gateway: Gateway, log: Logger, exit: (code: number) => void = (c) => process.exit(c)): () => void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting without waiting for the drain');
      exit(1);
      return;
    }
    stopping = true;
    log.info({ signal }, 'gateway stopping');
    gateway
      .drain()
      .then(() => gateway.close())
      .then(
        () => exit(0),
        (err: Error) => {
          log.error({ err: err.message }, 'gateway stop failed');
          exit(1);
        },
      );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return () => {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  };
}
