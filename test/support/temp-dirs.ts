/** Temporary folders a test file makes and removes once its tests are done. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

/**
 * A maker of fresh folders under the system's temporary directory named `<prefix>XXXXXX`, every one removed
 * after the file's last test (call at the top level of a file or a `describe`).
 */
export function tempDirsRemovedAfterAll(prefix: string): () => string {
  const made: string[] = [];
  afterAll(() => {
    for (const dir of made) rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    made.push(dir);
    return dir;
  };
}

/** A fresh folder `<prefix>XXXXXX` under the system's temporary directory, removed when the test's `cleanups` run. */
export function tempDirFor(cleanups: Array<() => unknown>, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
