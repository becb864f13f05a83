/**
 * The text a tick adds to the session as its input (docs/DESIGN.md §4, §5). A tick re-runs
 * the prompt against the session's current state; it never replays an old answer.
 */
import { LOOP_COMPLETE, type LoopRecord } from './loop-state.ts';
import { SILENT_REPLY } from '../economy/silent-reply.ts';

/**
 * Build the wakeup input of tick number `tickNumber` (1-based).
 * @returns plain text for the turn's new user-role message
 */
export function buildWakeupInput(loop: LoopRecord, tickNumber: number): string {
  if (loop.kind === 'heartbeat') {
    return [
      `[Heartbeat #${tickNumber}] Scheduled check-in, not a message from the user.`,
      `Instruction: ${loop.prompt}`,
      'Answer briefly; do not invent work.',
      `If nothing worth telling the user has changed since the last check-in, answer exactly ${SILENT_REPLY} and nothing else.`,
    ].join('\n');
  }
  const budget = loop.times !== null ? ` of ${loop.times}` : '';
  return [
    `[Loop wakeup #${tickNumber}${budget}] This is a recurring task, not a new message from the user.`,
    `Task: ${loop.prompt}`,
    'Check the current state afresh (do not rely on earlier answers) and report concisely.',
    `If nothing worth telling the user has changed since your last report, answer exactly ${SILENT_REPLY} and nothing else.`,
    `When the task is done, print ${LOOP_COMPLETE} on its own line.`,
  ].join('\n');
}
