/**
 * `hermes up --no-chat` as a child process on a home of its own, as a new user runs it: its own
 * embedded Redis, no key, no model, no Telegram from the test's environment, unless `extraEnv`
 * sets them. Killed (and awaited) by `cleanups`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { HERMES_BIN, SPAWN_START_TIMEOUT_MS, waitFor } from './stack.ts';

/** Variables of the test's own environment a fresh `hermes up` must not see. */
const FOREIGN = [
  'REDIS_URL',
  'REDIS_CLUSTER_NODES',
  'REDIS_SENTINELS',
  'HERMES_REDIS_PREFIX',
  'TELEGRAM_BOT_TOKEN',
  'API_SERVER_HOST',
  'API_SERVER_KEY',
  'OPENAI_BASE_URL',
  'OPENAI_API_KEY',
];

/** The environment of a `hermes` process of `home` whose API listens on `port`. */
export function upEnv(home: string, port: number, extraEnv: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, HERMES_HOME: home, API_SERVER_PORT: String(port), HERMES_LOG_LEVEL: 'warn' };
  for (const k of FOREIGN) delete env[k];
  return { ...env, ...extraEnv };
}

/** A running `hermes up`. */
export interface HermesUp {
  proc: ChildProcess;
  /** What it printed so far. */
  stdout(): string;
  stderr(): string;
  /** Its banner's lines (once `started` resolved). */
  banner(): string[];
  /** Resolves with the exit code (or the signal) once it ended. */
  exited: Promise<number | null>;
}

/**
 * Start `hermes up --no-chat` (plus `args`) with `env` and wait for its banner.
 * @throws Error with its stderr when it ends before the banner
 */
export async function startHermesUp(cleanups: Array<() => unknown>, env: NodeJS.ProcessEnv, args: string[] = []): Promise<HermesUp> {
  const proc = spawn(process.execPath, [HERMES_BIN, 'up', '--no-chat', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((r) => proc.on('close', (code) => r(code)));
  const ended = () => proc.exitCode !== null || proc.signalCode !== null;
  cleanups.push(async () => {
    if (!ended()) proc.kill('SIGKILL');
    await exited;
  });
  await waitFor(() => out.includes('Ctrl+C stops it.') || ended(), SPAWN_START_TIMEOUT_MS, 'the banner of hermes up');
  if (ended()) throw new Error(`hermes up ended (${proc.exitCode ?? proc.signalCode}) before its banner: ${err}`);
  return { proc, stdout: () => out, stderr: () => err, banner: () => out.trim().split('\n'), exited };
}
