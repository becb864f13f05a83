/**
 * Prints, as JSON, the jitter offsets (`jitterOffsetMs`) of the job ids given as arguments, for a
 * window of the first argument's seconds: test/cron-jitter.test.ts compares them with its own
 * process's. Run: `node … jitter-probe.ts <window-seconds> <id>…` (test/support/test-programs.ts).
 */
import { jitterOffsetMs } from '../../scheduler/cron/jitter.ts';

const [windowSeconds, ...ids] = process.argv.slice(2);
process.stdout.write(JSON.stringify(ids.map((id) => jitterOffsetMs(id, Number(windowSeconds)))));
