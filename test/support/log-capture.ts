/**
 * A pino logger whose lines a test reads back: for tests of what the code under test logs (a warning
 * said once, the fields of a line). pino writes each line to the stream as it is logged.
 */
import { Writable } from 'node:stream';
import { pino, type Logger, type LoggerOptions } from 'pino';

export interface CapturedLog {
  log: Logger;
  /** Every line written so far, as written (JSON and its newline), oldest first. */
  lines: string[];
  /** The lines at level warn. */
  warnings: () => string[];
  /** Every line written so far, parsed. */
  records: () => Record<string, unknown>[];
}

/** A logger at `options` (level info unless set) that keeps what it writes. */
export function captureLog(options: LoggerOptions = {}): CapturedLog {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const log = pino({ level: 'info', ...options }, sink);
  return {
    log,
    lines,
    warnings: () => lines.filter((l) => l.includes('"level":40')),
    records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
