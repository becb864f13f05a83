/**
 * Kinds of scheduled work. In a folder of their own, not scheduler/loop/, because
 * scheduler/store/keys.ts spells keys per kind and store/ imports no feature
 * package (test/layout.test.ts).
 */

/** Which of a session's two loop records: `/loop` or `/heartbeat` (docs/GLOSSARY.md "loop"). */
export type LoopKind = 'loop' | 'heartbeat';

/** Every {@link LoopKind}, for schemas that name one. */
export const LOOP_KINDS = ['loop', 'heartbeat'] as const satisfies readonly LoopKind[];

/** Kinds of scheduled work whose lateness is measured: a loop record's tick or a cron job's. */
export type TickKind = LoopKind | 'cron';
