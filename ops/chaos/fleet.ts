/**
 * The processes of a chaos run: its own Redis (AOF on), `hermes worker`
 * processes and a `hermes gateway`, each started with `node cli/hermes.mjs`
 * (tsx registered in-process, so the pid is the real process and SIGKILL is a
 * real crash). Logs go to files under the run's folder.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../scheduler/store/redis/embedded-redis.ts';

const HERMES = fileURLToPath(new URL('../../cli/hermes.mjs', import.meta.url));

/** One `hermes` child process. */
export interface Proc {
  name: string;
  child: ChildProcess;
  pid: number;
  startedAt: number;
  exited: Promise<void>;
}

/** Start `hermes <args>` with `env`, logging to `<logDir>/<name>.log`. */
export function startHermes(name: string, args: string[], env: NodeJS.ProcessEnv, logDir: string): Proc {
  mkdirSync(logDir, { recursive: true });
  const log = createWriteStream(join(logDir, `${name}.log`), { flags: 'a' });
  const child = spawn(process.execPath, [HERMES, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.pipe(log, { end: false });
  child.stderr.pipe(log, { end: false });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return { name, child, pid: child.pid!, startedAt: Date.now(), exited };
}

/** Whether the process still runs. */
export function alive(p: Proc): boolean {
  return p.child.exitCode === null && p.child.signalCode === null;
}

/** Send `signal` and wait for the exit (SIGKILL after `graceMs` if it does not). */
export async function stopProc(p: Proc, signal: NodeJS.Signals, graceMs = 10_000): Promise<void> {
  if (!alive(p)) return;
  p.child.kill(signal);
  const timer = setTimeout(() => alive(p) && p.child.kill('SIGKILL'), graceMs);
  await p.exited;
  clearTimeout(timer);
}

/** The run's Redis: restartable on the same port and folder (it reloads its AOF). */
export class ChaosRedis {
  private server: EmbeddedRedis | undefined;

  constructor(
    private readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    this.server = await startEmbeddedRedis({ dir: this.dir, port: this.port, appendonly: true });
  }

  /** SHUTDOWN by SIGTERM (the AOF is flushed), then start again on its AOF. @returns the downtime, ms */
  async restart(): Promise<number> {
    const t0 = Date.now();
    await this.server?.stop();
    await this.start();
    return Date.now() - t0;
  }

  async stop(): Promise<void> {
    await this.server?.stop();
  }
}
