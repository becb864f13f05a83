/**
 * `HERMES_HOME` and its `config.yaml` are trusted only when they are this user's (or root's) and
 * nobody else may write them (`scheduler/config/home-check.ts`): a home or file another user owns,
 * or that group or others may write, stops every command at start with the fix named (exit 2, as a
 * bad configuration); a private one starts. Real `hermes` processes (`cron next`, which needs no
 * Redis), and `loadConfig` for the near misses.
 */
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { describe } from 'vitest';
import { loadConfig } from '../scheduler/config/config.ts';
import { ConfigError } from '../scheduler/errors/config-error.ts';
import { HERMES_BIN } from './support/stack.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { tempDirFor } from './support/temp-dirs.ts';

const IS_ROOT = process.getuid?.() === 0;
const NOBODY_UID = IS_ROOT ? Number(execFileSync('id', ['-u', 'nobody'], { encoding: 'utf8' }).trim()) : -1;
const UID = process.getuid?.() ?? 0;

/** A fresh home (0700, this user's) with a `config.yaml` declaring a command tool, both at the given modes. */
function newHome(cleanups: CleanUp[], modes: { home?: number; config?: number } = {}): { home: string; file: string } {
  const parent = tempDirFor(cleanups, 'hermes-home-check-');
  const home = join(parent, 'home');
  mkdirSync(home, { mode: 0o700 });
  const file = join(home, 'config.yaml');
  writeFileSync(file, 'tools:\n  commands:\n    whoami:\n      command: id\n      description: who runs tools\n', { mode: 0o600 });
  chmodSync(file, modes.config ?? 0o600);
  chmodSync(home, modes.home ?? 0o700);
  return { home, file };
}

/** `hermes cron next` on `home`: a command that reads the configuration and nothing else. */
async function hermesOn(home: string, as?: 'nobody'): Promise<{ code: number; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, HERMES_HOME: home, HERMES_LOG_LEVEL: 'silent' };
  delete env.REDIS_URL;
  const argv = [process.execPath, HERMES_BIN, 'cron', 'next', 'every 1h', '-n', '1', '--json'];
  // Another user (root only): `runuser`, with a HOME that user may write (tsx's cache).
  const [cmd, ...args] = as ? ['runuser', '-u', as, '--', 'env', 'HOME=/tmp', ...argv] : argv;
  // That user runs this checkout's code: a checkout it cannot enter (a clone under a 0700 `mktemp -d`) is said
  // as such, not as a module the product lacks.
  if (as) {
    const readable = await promisify(execFile)('runuser', ['-u', as, '--', 'test', '-r', HERMES_BIN]).then(
      () => true,
      () => false,
    );
    if (!readable)
      throw new Error(`${as} cannot read ${HERMES_BIN}: clone the repository where other users may enter (chmod o+x its parents)`);
  }
  return await promisify(execFile)(cmd!, args, { env }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
  );
}

/** The message `loadConfig` refuses `home` with, or `undefined` when it loads. */
function refusal(home: string): string | undefined {
  try {
    loadConfig({ env: { HERMES_HOME: home } });
    return undefined;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.message;
  }
}

describe.concurrent('the home is checked at start, not only the file', () => {
  it('a private home and config.yaml start; so do a home and file others may only read, and a home not made yet', async ({
    cleanups,
    expect,
  }) => {
    const { home } = newHome(cleanups);
    const r = await hermesOn(home);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(r.stdout)).toHaveLength(1);
    expect(loadConfig({ env: { HERMES_HOME: home } }).tools.commands.whoami).toBeDefined();
    // Readable by others is the owner's choice (the long-running processes warn about the file).
    expect(refusal(newHome(cleanups, { home: 0o755, config: 0o644 }).home)).toBeUndefined();
    expect(refusal(newHome(cleanups, { home: 0o750, config: 0o640 }).home)).toBeUndefined();
    expect(refusal(join(newHome(cleanups).home, 'not-made-yet'))).toBeUndefined();
  });

  it('a home group or others may write is refused with `chmod 700` named, exit 2, nothing of its config loaded', async ({
    cleanups,
    expect,
  }) => {
    const { home } = newHome(cleanups, { home: 0o777 });
    const r = await hermesOn(home);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      `hermes: HERMES_HOME ${home} is writable by others (mode 0777): whoever can write there can replace config.yaml and the commands it declares. Fix: chmod 700 ${home}\n`,
    );
    expect(refusal(newHome(cleanups, { home: 0o770 }).home)).toMatch(/is writable by its group \(mode 0770\).*Fix: chmod 700 /);
    expect(refusal(newHome(cleanups, { home: 0o1777 }).home)).toMatch(/is writable by others \(mode 0777\)/); // sticky: others still add files
    expect(refusal(newHome(cleanups, { home: 0o702 }).home)).toMatch(/is writable by others \(mode 0702\)/);
    // A symlink is followed: what counts is the folder it leads to.
    const open = newHome(cleanups, { home: 0o777 });
    const link = join(newHome(cleanups).home, 'link');
    symlinkSync(open.home, link);
    expect(refusal(link)).toMatch(/is writable by others \(mode 0777\)/);
  });

  it('a config.yaml group or others may write is refused with `chmod 600` named, exit 2', async ({ cleanups, expect }) => {
    const { home, file } = newHome(cleanups, { config: 0o666 });
    const r = await hermesOn(home);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `hermes: ${file} is writable by others (mode 0666): whoever can write it decides the commands a worker runs. Fix: chmod 600 ${file}\n`,
    );
    expect(refusal(newHome(cleanups, { config: 0o620 }).home)).toMatch(/config\.yaml is writable by its group \(mode 0620\).*chmod 600/);
    expect(refusal(newHome(cleanups, { config: 0o602 }).home)).toMatch(/is writable by others \(mode 0602\)/);
  });

  // Making a folder or file another user owns needs root (chown); as another user, these run only under root.
  it.runIf(IS_ROOT)(
    "as root (chown nobody, runuser): another user's home, another user's config.yaml, and a 0777 home holding another user's 0600 config.yaml are refused with chown named; root's home is trusted by another user unless others may write it",
    async ({ cleanups, expect }) => {
      const foreignHome = newHome(cleanups);
      chownSync(foreignHome.home, NOBODY_UID, NOBODY_UID);
      const r = await hermesOn(foreignHome.home);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(
        `hermes: HERMES_HOME ${foreignHome.home} belongs to uid ${NOBODY_UID}, not to this user (uid ${UID}): its config.yaml would decide what runs as you. ` +
          `Use a home of your own (HERMES_HOME), or take this one over: chown -R ${UID} ${foreignHome.home} && chmod 700 ${foreignHome.home}\n`,
      );

      const foreignFile = newHome(cleanups);
      chownSync(foreignFile.file, NOBODY_UID, NOBODY_UID);
      const f = await hermesOn(foreignFile.home);
      expect(f.code).toBe(2);
      expect(f.stderr).toBe(
        `hermes: ${foreignFile.file} belongs to uid ${NOBODY_UID}, not to this user (uid ${UID}): it would declare another user's keys and command tools. ` +
          `Check what it holds, then: chown ${UID} ${foreignFile.file} && chmod 600 ${foreignFile.file} (or remove it)\n`,
      );

      // The case this closes: anyone could have put their own 0600 config.yaml (with its command tools) into a 0777 home.
      const planted = newHome(cleanups, { home: 0o777 });
      chownSync(planted.file, NOBODY_UID, NOBODY_UID);
      expect(refusal(planted.home)).toMatch(/HERMES_HOME .* is writable by others \(mode 0777\)/);
      chmodSync(planted.home, 0o700);
      expect(refusal(planted.home)).toMatch(new RegExp(`config\\.yaml belongs to uid ${NOBODY_UID}`));

      // A symlink in a private home to another user's file: the file it leads to is what is read, so what is checked.
      const linked = newHome(cleanups);
      rmSync(linked.file);
      symlinkSync(foreignFile.file, linked.file);
      expect(refusal(linked.home)).toContain(`belongs to uid ${NOBODY_UID}`);

      // Root's home and file are trusted by every user (root can change anything of theirs anyway): nobody starts on
      // a 0755 home and 0644 config.yaml of root's; a root home that others may write is still refused.
      const rootHome = newHome(cleanups, { home: 0o755, config: 0o644 });
      chmodSync(dirname(rootHome.home), 0o755);
      const asNobody = await hermesOn(rootHome.home, 'nobody');
      expect(asNobody).toMatchObject({ code: 0, stderr: '' });
      expect(JSON.parse(asNobody.stdout)).toHaveLength(1);
      chmodSync(rootHome.home, 0o757);
      expect(await hermesOn(rootHome.home, 'nobody')).toMatchObject({
        code: 2,
        stderr: expect.stringContaining(`is writable by others (mode 0757)`),
      });
    },
  );
});
