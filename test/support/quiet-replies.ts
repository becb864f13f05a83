/**
 * Replies in the shapes real models answer `[SILENT]` in, and near misses that mention it (docs/CONTEXT.md,
 * "Quiet ticks"): the recogniser's table (silent-reply.test.ts) and what the fake model answers on each
 * delivery path (quiet-replies.test.ts).
 */

/** The eleven shapes of the marker the recogniser takes, each a whole reply. */
export const SILENT_SHAPES: ReadonlyArray<[string, string]> = [
  ['exact', '[SILENT]'],
  ['surrounding whitespace', '  [SILENT]\n'],
  ['a full stop after it', '[SILENT].'],
  ['lower case', '[silent]'],
  ['without brackets', 'SILENT'],
  ['bold', '**[SILENT]**'],
  ['italic', '*[SILENT]*'],
  ['underscores, mixed case', '_[Silent]_'],
  ['a code span', '`[SILENT]`'],
  ['a code fence', '```\n[SILENT]\n```'],
  ['a code fence with an info string', '```text\n[SILENT]\n```'],
];

/** The marker as the first or the last line of a longer reply (the rest stays in the transcript). */
export const SILENT_LINES: ReadonlyArray<[string, string]> = [
  ['the last line after a sentence', 'Nothing changed.\n\n[SILENT]'],
  ['the first line before a sentence', '[SILENT]\nThe build is still running, as at the last check.'],
];

/** Replies that mention the marker but are not it: each is delivered. */
export const NEAR_MISSES: ReadonlyArray<[string, string]> = [
  ['inside a sentence', 'the marker [SILENT] means quiet'],
  ['at the start of a sentence', '[SILENT] would mean nothing changed, but the build is red.'],
  ['at the end of a sentence', 'Nothing to add, so normally I would answer [SILENT]'],
  ['on a middle line', 'The build is red.\n[SILENT]\nI will check again at the next tick.'],
  ['a word that contains it', 'SILENTLY failing: the deploy is stuck.'],
  ['a longer phrase', 'Silent night.'],
];
