/**
 * `hermes chat --session S`: attach to a session. Lines typed are queued as
 * session input (messages or slash commands); replies and ticks are printed as
 * they arrive. Ctrl+D detaches (schedules keep firing). On reattach the client
 * first prints what it missed since the last event it saw; that position is
 * kept in `$HERMES_HOME/clients/<session>.last-event-id`.
 *
 * Ctrl+C while a loop wakeup turn runs pauses the loop (docs/DESIGN.md §4); otherwise it
 * detaches like Ctrl+D.
 */
import { openRedisClient } from '../scheduler/store/redis/connection-factory.ts';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { HermesConfig } from '../scheduler/config/config.ts';
import { parseChatCommand } from '../scheduler/session/chat-command.ts';
import { enqueueInput, inputOccurrenceId } from '../scheduler/session/inbox.ts';
import type { SessionEvent } from '../scheduler/session/session-store.ts';
import { assertSessionId } from '../scheduler/session/session-id.ts';
import { createLogger } from '../scheduler/logger.ts';
import type { CliConnection } from './cli-context.ts';
import { formatEvent } from './event-format.ts';
import { printOut } from './terminal-text.ts';
import { cliLogLevel } from './run-command.ts';
import { loopStoreFor, loopServiceFor, sessionStoreFor } from '../scheduler/services.ts';
import { encodeTurnAbort } from '../scheduler/session/turn-abort.ts';
import { ensurePrivateDir } from '../scheduler/private-files.ts';

/** How long a detaching client waits for answers to input it sent (ms). */
export const ANSWER_WAIT_MS = 15_000;

/** Events shown on a first attach, for context. */
export const FIRST_ATTACH_BACKLOG = 5;

function positionFile(home: string, sessionId: string): string {
  return join(home, 'clients', `${sessionId.replace(/[^A-Za-z0-9_.-]/g, '_')}.last-event-id`);
}

/** Why a chat client detached: end of input (Ctrl+D, or piped input ran out) or Ctrl+C. */
export type DetachReason = 'end-of-input' | 'interrupt';

/**
 * Run the chat client until stdin ends (Ctrl+D) or Ctrl+C.
 * @param io.out - where to print (default stdout, through `terminal-text.ts`)
 * @returns when detached, with the reason (`hermes up` stops the stack on `interrupt`)
 */
export async function runChat(
  config: HermesConfig,
  conn: CliConnection,
  sessionId: string,
  io: { input?: NodeJS.ReadableStream; out?: (line: string) => void } = {},
): Promise<DetachReason> {
  assertSessionId(sessionId);
  const out = io.out ?? printOut;
  const reader = openRedisClient(conn.topology, 'bullmq');
  reader.on('error', () => {});
  const sessions = sessionStoreFor(config, conn.redis, conn.keys);
  const blocking = sessionStoreFor(config, reader, conn.keys);
  const file = positionFile(config.home, sessionId);
  ensurePrivateDir(join(config.home, 'clients'));
  const saved = existsSync(file) ? readFileSync(file, 'utf8').trim() : '';
  let lastId = saved;
  /** The occurrence id of the wakeup turn running now, as its `tick.started` event named it. */
  let runningTick: string | undefined;
  /** Inputs sent from this client that have no answer yet (by occurrence id). */
  const awaiting = new Set<string>();
  const show = (events: SessionEvent[]) => {
    for (const e of events) {
      if (e.type === 'tick.started' && typeof e.data.occurrenceId === 'string') runningTick = e.data.occurrenceId;
      if ((e.type === 'reply' || e.type === 'tick.failed') && e.data.source !== 'message') runningTick = undefined;
      if (typeof e.data.occurrenceId === 'string') awaiting.delete(e.data.occurrenceId);
      const text = formatEvent(e);
      if (text) out(text);
      lastId = e.id;
    }
    if (events.length > 0) writeFileSync(file, lastId);
  };

  out(`Attached to session ${sessionId}. Type a message or /help; Ctrl+D detaches (schedules keep running).`);
  if (saved) {
    const missed = await sessions.readEvents(sessionId, saved, { count: 10_000 });
    out(missed.length > 0 ? `── ${missed.length} event(s) while you were away ──` : '── nothing new since you left ──');
    show(missed);
    if (missed.length > 0) out('── now live ──');
  } else {
    lastId = '0';
    show(await sessions.recentEvents(sessionId, FIRST_ATTACH_BACKLOG));
    if (lastId === '0') lastId = await sessions.lastEventId(sessionId);
  }

  let detached = false;
  const tail = (async () => {
    while (!detached) {
      try {
        show(await blocking.readEvents(sessionId, lastId || '0', { blockMs: 500 }));
      } catch {
        if (!detached) await new Promise((r) => setTimeout(r, 500));
      }
    }
  })();

  const rl = createInterface({ input: io.input ?? process.stdin, terminal: false });
  const log = createLogger({ level: cliLogLevel(config), name: 'chat' });
  const schedules = loopServiceFor(config, loopStoreFor(config, conn), log);
  const done = new Promise<void>((resolve) => {
    rl.on('line', (line) => {
      const text = line.trim();
      if (text.length === 0) return;
      const command = parseChatCommand(text);
      if (command.kind === 'other-bot') {
        // Workers ignore a command addressed to another bot; say so here instead of waiting for an answer.
        out(`Not sent: /${command.name}@${command.bot} is addressed to another bot.`);
        return;
      }
      const messageId = `${Date.now()}-${randomBytes(4).toString('hex')}`;
      awaiting.add(inputOccurrenceId(sessionId, messageId));
      enqueueInput(
        { redis: conn.redis, keys: conn.keys, queues: conn.queues, maxChars: config.agent.max_prompt_chars },
        { sessionId, text, messageId, origin: { surface: 'chat' } },
      ).catch((err: Error) => {
        awaiting.delete(inputOccurrenceId(sessionId, messageId));
        out(`Not sent: ${err.message}`);
      });
    });
    rl.on('close', () => resolve());
  });
  let reason: DetachReason = 'end-of-input';
  let hurry = false;
  const onSigint = () => {
    if (reason === 'interrupt') {
      // A second Ctrl+C while waiting for answers: stop waiting.
      hurry = true;
    } else if (runningTick !== undefined) {
      // docs/DESIGN.md §4: interrupting a wakeup turn pauses the loop. The loop is paused first, so no next
      // tick starts; then that tick's turn (and its processes) is aborted on whichever worker runs
      // it. The request names the tick's occurrence: a turn that started since is never hit.
      const occurrenceId = runningTick;
      schedules
        .pause(sessionId, 'loop')
        .then(async (r) => {
          await conn.redis.publish(conn.keys.turnAbortChannel, encodeTurnAbort({ sessionId, occurrenceId, by: 'interrupt' }));
          out(`Interrupted the wakeup turn. ${r}`);
        })
        .catch((e: Error) => out(e.message));
      runningTick = undefined;
    } else {
      reason = 'interrupt';
      rl.close();
    }
  };
  // The SIGINT listener stays until the client is gone, so no Ctrl+C meets Node's default (exit at once).
  process.on('SIGINT', onSigint);
  await done;
  // End of input (Ctrl+D, or the end of piped input): give answers to what was just sent a moment to arrive.
  const deadline = Date.now() + ANSWER_WAIT_MS;
  while (awaiting.size > 0 && Date.now() < deadline && !hurry) await new Promise((r) => setTimeout(r, 100));
  process.off('SIGINT', onSigint);
  detached = true;
  await tail;
  reader.disconnect();
  if (lastId) writeFileSync(file, lastId);
  out(`Detached from session ${sessionId}. Its schedules keep running; \`hermes chat --session ${sessionId}\` reattaches.`);
  return reason;
}
