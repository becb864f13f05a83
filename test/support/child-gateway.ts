/** Start `test/support/gateway-child.ts` as its own process (bundled for the run, test/support/test-programs.ts), for crash and signal tests. */
import { spawn, type ChildProcess } from 'node:child_process';
import { programArgs } from './test-programs.ts';

export interface ChildGateway {
  proc: ChildProcess;
  url: string;
  instanceId: string;
  /** stderr so far (pino logs). */
  readonly stderr: string;
  /** Resolves with the exit code (or signal) once the process ended. */
  exited: Promise<number | string>;
  kill(signal?: NodeJS.Signals): void;
}

/**
 * Spawn a gateway with `env` and wait for READY (default 45 s: a loaded machine takes long to start a process).
 * @throws Error with its stderr when it exits or is not ready in time (it is killed then)
 */
export async function spawnGateway(env: NodeJS.ProcessEnv, timeoutMs = 45_000): Promise<ChildGateway> {
  // node itself (the bundle, or the source with tsx as a loader; not the tsx CLI, which runs the script
  // in a second process): the pid we signal is the gateway's own, so SIGKILL is a real crash.
  const proc = spawn(process.execPath, programArgs('gateway-child'), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | string>((r) => proc.once('exit', (code, sig) => r(code ?? sig ?? -1)));
  const ready = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`gateway child not ready in ${timeoutMs} ms:\n${stderr}`));
    }, timeoutMs);
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('READY '));
      if (line) {
        clearTimeout(timer);
        resolve(line);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`gateway child exited (${code}) before READY:\n${stderr}`));
    });
  });
  const [, url, instanceId] = ready.split(' ');
  return {
    proc,
    url: url!,
    instanceId: instanceId!,
    exited,
    get stderr() {
      return stderr;
    },
    kill(signal: NodeJS.Signals = 'SIGKILL') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
    },
  };
}
