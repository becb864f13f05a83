/**
 * Self-paced loop cadence (docs/DESIGN.md §4): no extra model call. After each tick the
 * reply is normalised (lower-cased; times, dates and durations removed;
 * whitespace collapsed) and digested. Unchanged → the delay doubles up to the
 * ceiling; changed → it snaps back to the floor.
 */
import { createHash } from 'node:crypto';

const PATTERNS: RegExp[] = [
  /\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?\b/g, // ISO dates / datetimes
  /\b\d{1,2}[/.]\d{1,2}[/.]\d{2,4}\b/g, // 29/11/2026, 11.29.26
  /\b\d{1,2}:\d{2}(?::\d{2})?(?:\s?[ap]\.?m\.?)?\b/g, // 10:35, 10:35:12, 9:05 pm
  /\b\d{1,2}\s?[ap]\.?m\.?\b/g, // 7am
  /\b\d+(?:\.\d+)?\s?(?:ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|weeks?)\b/g, // durations
  /\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?\b/g,
  /\b(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*day\b/g,
  /\b(?:today|yesterday|tomorrow|now|ago)\b/g,
];

/** The normalised form of a reply used for change detection. */
export function normaliseReply(reply: string): string {
  let s = reply.toLowerCase();
  for (const p of PATTERNS) s = s.replace(p, ' ');
  return s.replace(/\s+/g, ' ').trim();
}

/** Digest (sha256 hex, first 32 chars) of the normalised reply. */
export function replyDigest(reply: string): string {
  return createHash('sha256').update(normaliseReply(reply)).digest('hex').slice(0, 32);
}

/**
 * The next self-paced delay.
 * @param previousDigest - digest of the previous tick's reply (`null` before the first)
 * @returns seconds until the next tick
 */
export function nextSelfPacedDelay(input: {
  currentDelaySeconds: number;
  previousDigest: string | null;
  digest: string;
  floorSeconds: number;
  ceilingSeconds: number;
}): number {
  if (input.previousDigest === null || input.previousDigest !== input.digest) return input.floorSeconds;
  return Math.min(input.ceilingSeconds, Math.max(input.floorSeconds, input.currentDelaySeconds * 2));
}

/**
 * A delay the agent asked for (the `schedules` tool's `next`, in a self-paced loop's tick), kept
 * between the floor and the ceiling (`loops.self_paced_floor_seconds`, `…_ceiling_seconds`).
 * @returns whole seconds
 */
export function clampSelfPacedDelay(requestedSeconds: number, floorSeconds: number, ceilingSeconds: number): number {
  return Math.min(ceilingSeconds, Math.max(floorSeconds, Math.round(requestedSeconds)));
}
