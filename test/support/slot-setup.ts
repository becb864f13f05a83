/**
 * Every file of `npm test` runs while it holds a machine test slot (`machine-slots.ts`): taken before the
 * file's own hooks, freed after them.
 */
import { afterAll, beforeAll } from 'vitest';
import { freeSlotsOf, takeTestSlot } from './machine-slots.ts';

/** How long a file may wait for a slot while other runs of the suite hold them all, ms. */
const SLOT_WAIT_MS = 30 * 60_000;

let release: (() => void) | undefined;
beforeAll(async () => {
  freeSlotsOf(process.pid);
  release = await takeTestSlot();
}, SLOT_WAIT_MS);
afterAll(() => {
  release?.();
  release = undefined;
});
