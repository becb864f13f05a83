/**
 * The journal of an occurrence's agent turn as its runner uses it (docs/RELIABILITY.md, "A turn
 * resumes from its journal"): read once when the turn starts — a journal already there means an
 * earlier run of this occurrence (a retry after a crash, a takeover after a lapsed lock, a hand-back
 * at drain) got that far — and appended to, one step at a time, before the next step starts. Loop
 * ticks and cron runs open it the same way, without the read when their claim found it empty (the
 * claim scripts answer its length: `claim-tick-8.lua`, `claim-cron-occurrence-5.lua`); the commit
 * deletes it (`commit-turn-7.lua`, `commit-cron-run-8.lua`).
 */
import type { Logger } from 'pino';
import { TurnError } from '../../scheduler/errors/turn-error.ts';
import { inDoubtCalls, isResumed, NO_REPLAY, replayOf, type TurnReplay } from '../../scheduler/journal/turn-replay.ts';
import type { TurnJournal } from '../turn-runners/turn-runner.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/**
 * The journal of `occurrenceId`'s turn in `sessionId` (a cron run's session is `cron:<id>`), with
 * what earlier runs recorded; a resumed turn is logged with what it found.
 * @throws TurnError `network` when the journal cannot be read (its append throws the same)
 */
export async function openTurnJournal(
  deps: Pick<WorkerDeps, 'journals'>,
  sessionId: string,
  occurrenceId: string,
  log: Logger,
): Promise<TurnJournal> {
  let replay;
  try {
    replay = replayOf(await deps.journals.read(sessionId, occurrenceId));
  } catch (err) {
    throw unavailableJournal(sessionId, err);
  }
  if (isResumed(replay)) {
    log.info(
      { occurrenceId, answers: replay.answers.size, results: replay.results.size, inDoubt: inDoubtCalls(replay) },
      'turn resumed from its journal',
    );
  }
  return journalOf(deps, sessionId, occurrenceId, replay);
}

/**
 * The journal of a turn known to have none yet (its claim found it empty: `claim-tick-8.lua`), without a read.
 */
export function emptyTurnJournal(deps: Pick<WorkerDeps, 'journals'>, sessionId: string, occurrenceId: string): TurnJournal {
  return journalOf(deps, sessionId, occurrenceId, NO_REPLAY);
}

function journalOf(deps: Pick<WorkerDeps, 'journals'>, sessionId: string, occurrenceId: string, replay: TurnReplay): TurnJournal {
  return {
    occurrenceId,
    replay,
    async append(entry) {
      try {
        await deps.journals.append(sessionId, occurrenceId, entry);
      } catch (err) {
        throw unavailableJournal(sessionId, err);
      }
    },
  };
}

function unavailableJournal(sessionId: string, err: unknown): TurnError {
  return new TurnError(`The turn's journal could not be reached in Redis: ${(err as Error).message}`, {
    kind: 'network',
    sessionId,
    cause: err,
  });
}
