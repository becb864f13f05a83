/**
 * DST and time-zone compliance of cron fire times (docs/DESIGN.md §7 Time zones; cases in
 * test/fixtures/dst.json, each from a public bug report). Every path that decides a fire time is checked: the engine,
 * the `hermes cron next` preview and the BullMQ repeat strategy — in this
 * process and in a child process with TZ=Australia/Sydney.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { DST_CASES, dstCases, probe } from './support/dst-probe.ts';
import { programArgs } from './support/test-programs.ts';

const cases = dstCases();

describe('DST cases (dst.json)', () => {
  it('the case file is read whole (fifteen cases or more)', () => {
    expect(cases.length).toBeGreaterThanOrEqual(15);
  });

  it.each(cases.map((c) => [`${c.pattern} in ${c.tz} from ${c.from} (${c.why})`, c] as const))('%s', (_name, c) => {
    const r = probe(c);
    expect(r.engine).toEqual(c.expect);
    expect(r.preview).toEqual(c.expect);
    expect(r.strategy).toEqual(c.expect);
  });

  it('gives the same results under TZ=Australia/Sydney (the process zone never matters)', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [...programArgs('dst-probe'), DST_CASES], {
      env: { ...process.env, TZ: 'Australia/Sydney' },
      cwd: new URL('..', import.meta.url).pathname,
    });
    const out = JSON.parse(stdout) as { tz: string; offset: number; results: Array<ReturnType<typeof probe>> };
    expect(out.tz).toBe('Australia/Sydney');
    expect(out.offset).toBeLessThan(0); // the child really runs east of UTC
    out.results.forEach((r, i) => {
      expect(r.engine, cases[i]!.why).toEqual(cases[i]!.expect);
      expect(r.preview, cases[i]!.why).toEqual(cases[i]!.expect);
      expect(r.strategy, cases[i]!.why).toEqual(cases[i]!.expect);
    });
  });
});
