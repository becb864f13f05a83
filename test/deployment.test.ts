/**
 * The deployment files in `ops/` (systemd units, Dockerfile, compose.yaml)
 * say what docs/OPERATIONS.md promises: hardened units whose stop timeout
 * outlasts the drain, a non-root image without dev dependencies whose health
 * check probes a path the gateway serves, and a Redis with AOF and noeviction.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { startGateway } from '../gateway/gateway-process.ts';
import { loadConfig } from '../scheduler/config/config.ts';
import { createLogger } from '../scheduler/logger.ts';
import { testEnv } from './support/env.ts';
import { ROOT, startWorker } from './support/stack.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { launcherNodeOptions } from '../ops/bench/bench-support.ts';

const cleanups = cleanupAfterEach();

const DEFAULT_DRAIN_SECONDS = loadConfig({ env: { HERMES_HOME: '/nonexistent-hermes-home' } }).agent.cron_drain_timeout;

/** `Key=value` lines of a unit's [Service] section (a key may repeat). */
function serviceSection(file: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let inService = false;
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const line = raw.trim();
    if (line.startsWith('[')) inService = line === '[Service]';
    else if (inService && line && !line.startsWith('#')) {
      const i = line.indexOf('=');
      out.set(line.slice(0, i), [...(out.get(line.slice(0, i)) ?? []), line.slice(i + 1)]);
    }
  }
  return out;
}

/** Seconds of a Docker/compose duration like `45s` or `1m30s`. */
function durationSeconds(text: string): number {
  let total = 0;
  for (const [, n, unit] of text.matchAll(/(\d+)(h|m|s)/g)) total += Number(n) * (unit === 'h' ? 3600 : unit === 'm' ? 60 : 1);
  return total;
}

describe('systemd units', () => {
  for (const [unit, command] of [
    ['hermes-gateway.service', 'gateway'],
    ['hermes-worker@.service', 'worker'],
  ] as const) {
    it(`${unit}: non-root, hardened, restarted on failure, stopped only after the drain`, async () => {
      const file = join(ROOT, 'ops', 'systemd', unit);
      const s = serviceSection(file);
      const one = (k: string) => s.get(k)?.at(-1);
      expect(one('User')).toBe('hermes');
      expect(one('NoNewPrivileges')).toBe('yes');
      expect(one('ProtectSystem')).toBe('strict');
      expect(one('ReadWritePaths')).toBe('/var/lib/hermes');
      expect(s.get('Environment')).toContain('HERMES_HOME=/var/lib/hermes');
      expect(one('Restart')).toBe('on-failure');
      expect(one('KillSignal')).toBe('SIGTERM');
      expect(Number(one('TimeoutStopSec'))).toBeGreaterThanOrEqual(DEFAULT_DRAIN_SECONDS + 10);
      const exec = one('ExecStart')!.split(/\s+/);
      expect(exec.slice(-2)).toEqual(['/opt/hermes-scheduler/cli/hermes.mjs', command]);
      expect(existsSync(join(ROOT, 'cli', 'hermes.mjs'))).toBe(true);
      if (existsSync('/usr/bin/systemd-analyze')) {
        // systemd's own parser: unknown keys or bad values are reported (a template needs an instance name).
        const dir = mkdtempSync(join(tmpdir(), 'hermes-units-'));
        cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
        const copy = join(dir, unit.replace('@.', '@1.'));
        copyFileSync(file, copy);
        const { stdout, stderr } = await promisify(execFile)('systemd-analyze', ['verify', copy]).catch(
          (e: { stdout: string; stderr: string }) => e,
        );
        expect(`${stdout}${stderr}`.split('\n').filter((l) => /Unknown|Invalid|Failed to parse|bad-setting/i.test(l))).toEqual([]);
      }
    });
  }
});

describe('Node options of a worker', () => {
  it('a worker started as `node cli/hermes.mjs` (the systemd unit, compose) gets the options of the `#!` line of `hermes`', () => {
    const options = launcherNodeOptions();
    expect(options).toContain('--max-semi-space-size=64');
    expect(serviceSection(join(ROOT, 'ops', 'systemd', 'hermes-worker@.service')).get('Environment')).toContain(
      `NODE_OPTIONS=${options.join(' ')}`,
    );
    const compose = parseYaml(readFileSync(join(ROOT, 'ops', 'compose.yaml'), 'utf8'), { merge: true }) as {
      services: Record<string, { environment?: Record<string, string> }>;
    };
    expect(compose.services.worker!.environment!.NODE_OPTIONS).toBe(options.join(' '));
  });
});

describe('Dockerfile and compose.yaml', () => {
  it('the image runs as non-root without dev dependencies, and its health check probes a path the gateway serves', async () => {
    const docker = readFileSync(join(ROOT, 'ops', 'Dockerfile'), 'utf8');
    expect(docker).toMatch(/^FROM node:20/m);
    expect(docker).toMatch(/^RUN npm ci --omit=dev/m);
    expect(docker).toMatch(/^USER node$/m);
    expect(docker).toMatch(/^ENTRYPOINT \["node", "cli\/hermes\.mjs"\]$/m);
    const probe = /HEALTHCHECK[\s\S]*?\/health\/ready/.exec(docker);
    expect(probe).not.toBeNull();

    // The probed path answers 200 on a gateway whose Redis is up and that has a worker.
    const env = testEnv({ 'api_server.port': 0, 'api_server.key': 'docker-key' });
    cleanups.push(() => env.cleanup());
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: 'silent' }) });
    cleanups.push(() => gw.close());
    const worker = await startWorker(env);
    cleanups.push(() => worker.drain());
    expect((await fetch(`${gw.httpAddress.url}/health/ready`)).status).toBe(200);
  });

  it('compose runs Redis with AOF and noeviction, N workers and a gateway on loopback, each given time to drain', () => {
    const compose = parseYaml(readFileSync(join(ROOT, 'ops', 'compose.yaml'), 'utf8'), { merge: true }) as {
      services: Record<
        string,
        {
          command?: string[];
          stop_grace_period?: string;
          deploy?: { replicas?: number };
          ports?: string[];
          environment?: Record<string, string>;
          build?: { dockerfile: string };
        }
      >;
    };
    const { redis, worker, gateway } = compose.services;
    expect(redis!.command!.join(' ')).toMatch(/--appendonly yes/);
    expect(redis!.command!.join(' ')).toMatch(/--maxmemory-policy noeviction/);
    // A password, on stdin rather than the command line; the workers and the gateway use it.
    expect(redis!.command!.join(' ')).toMatch(/redis-server - .*\n\s*requirepass \$\$REDIS_PASSWORD\n/);
    expect(redis!.command!.join(' ')).not.toMatch(/--requirepass/);
    expect(worker!.command).toEqual(['worker']);
    expect(worker!.deploy!.replicas).toBeGreaterThanOrEqual(2);
    expect(gateway!.command).toEqual(['gateway']);
    expect(gateway!.ports).toEqual(['127.0.0.1:8642:8642']);
    for (const s of [worker!, gateway!]) {
      expect(durationSeconds(s.stop_grace_period!)).toBeGreaterThanOrEqual(DEFAULT_DRAIN_SECONDS + 10);
      expect(s.environment!.REDIS_URL).toBe('redis://redis:6379');
      expect(s.environment!.REDIS_PASSWORD).toMatch(/^\$\{REDIS_PASSWORD:\?/);
      expect(s.build!.dockerfile).toBe('ops/Dockerfile');
    }
    expect(existsSync(join(ROOT, 'ops', 'Dockerfile'))).toBe(true);
  });
});
