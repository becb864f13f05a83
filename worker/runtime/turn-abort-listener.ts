/**
 * The channel every worker listens on for requests to abort a running turn (`Keys.turnAbortChannel`,
 * `scheduler/session/turn-abort.ts`): a session's `/stop`, Ctrl+C in `hermes chat`, and a newer
 * occurrence of a cron job with `--overlap cancel_other`. The worker running the turn aborts it
 * (`TurnTracker.abortTurns`: its commands' process groups are signalled); the others find none.
 */
import { decodeTurnAbort } from '../../scheduler/session/turn-abort.ts';
import { openRedisClient, type RedisClient, type RedisTopology } from '../../scheduler/store/redis/connection-factory.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/** What a stopped turn is logged as, by who asked. */
const LOGGED = {
  stop: 'running turn stopped by the user',
  interrupt: 'running turn stopped by the user',
  overlap: 'running turn cancelled for a newer occurrence',
};

/**
 * Subscribe to the channel; resolves once subscribed.
 * @returns the subscriber connection (the caller disconnects it when it stops)
 */
export async function listenForTurnAborts(topology: RedisTopology, deps: Pick<WorkerDeps, 'turns' | 'log' | 'keys'>): Promise<RedisClient> {
  const listener = openRedisClient(topology, 'commands');
  listener.on('message', (_channel: string, message: string) => {
    const request = decodeTurnAbort(message);
    if (!request) return;
    const n = deps.turns.abortTurns(request);
    if (n > 0)
      deps.log.info({ sessionId: request.sessionId, occurrenceId: request.occurrenceId, by: request.by, turns: n }, LOGGED[request.by]);
  });
  await listener.subscribe(deps.keys.turnAbortChannel);
  return listener;
}
