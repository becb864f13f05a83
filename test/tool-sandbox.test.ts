/**
 * What the operator's tools refuse, whatever the model asks: paths outside
 * `tools.files.roots` (absolute, `../`, symlinks), hosts outside
 * `tools.http.allow` (also when reached by a redirect), shell syntax in a
 * command's arguments, and the worker's secrets in a tool's environment.
 * The real tools run through the real Toolbox (timeouts, caps, errors).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { execFileSync } from 'node:child_process';
import { closeSync, constants, existsSync, mkdirSync, openSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from './support/wait-for.ts';
import { loadConfig } from '../scheduler/config/config.ts';
import { httpGetRefusedReason } from '../worker/tools/http-tool-policy.ts';
import type { Resolver } from '../worker/guarded-lookup.ts';
import { httpTool } from '../worker/tools/http-tool.ts';
import { Toolbox } from '../worker/tools/toolbox.ts';
import type { ScheduleStatusSources } from '../worker/tools/schedule-status-tool.ts';

let dir: string;
let root: string;
let server: Server;
let port: number;
const hits: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hermes-sandbox-'));
  root = join(dir, 'root');
  mkdirSync(join(root, 'sub'), { recursive: true });
  writeFileSync(join(root, 'sub', 'a.txt'), 'inside');
  writeFileSync(join(dir, 'secret.txt'), 'outside');
  symlinkSync(join(dir, 'secret.txt'), join(root, 'link-out'));
  symlinkSync(join(root, 'sub', 'a.txt'), join(root, 'link-in'));
  mkdirSync(join(dir, 'outside-dir'));
  writeFileSync(join(dir, 'outside-dir', 'secret.txt'), 'outside');
  symlinkSync(join(dir, 'outside-dir'), join(root, 'dir-out'));
  mkdirSync(join(root, 'a', 'b'), { recursive: true });
  mkdirSync(join(dir, 'outside-dir', 'deep'));
  symlinkSync(join(dir, 'outside-dir', 'deep'), join(root, 'a', 'b', 'deep-out'));
  symlinkSync(join(dir, 'no-such-target'), join(root, 'dangling-out'));
  symlinkSync(join(dir, 'secret.txt'), join(root, 'dangling-ok'));
  symlinkSync('loop-b', join(root, 'loop-a'));
  symlinkSync('loop-a', join(root, 'loop-b'));
  server = createServer((req, res) => {
    hits.push(req.url ?? '');
    if (req.url === '/redirect-out') res.writeHead(302, { location: `http://127.0.0.1:${port}/secret` }).end();
    else if (req.url === '/redirect-in') res.writeHead(302, { location: `http://localhost:${port}/ok` }).end();
    else if (req.url === '/big') res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(100_000));
    else res.writeHead(200, { 'content-type': 'text/plain' }).end(`you reached ${req.url}`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

const noStores = {} as ScheduleStatusSources;
const ctx = { sessionId: 's', surface: 'chat' as const, signal: new AbortController().signal, timeoutMs: 30_000 };

function toolbox(tools: Record<string, unknown>): Toolbox {
  const config = loadConfig({ env: { HERMES_HOME: dir }, overrides: { tools } });
  return new Toolbox(config, noStores, process.env);
}

describe('read_file and list_dir stay inside the roots', () => {
  it('reads a file under the root (relative or absolute) and a symlink that stays inside', async () => {
    const t = toolbox({ files: { roots: [root] } });
    expect((await t.call('read_file', JSON.stringify({ path: 'sub/a.txt' }), ctx)).content).toBe('inside');
    expect((await t.call('read_file', JSON.stringify({ path: join(root, 'sub/a.txt') }), ctx)).content).toBe('inside');
    expect((await t.call('read_file', JSON.stringify({ path: 'link-in' }), ctx)).content).toBe('inside');
    expect((await t.call('list_dir', '{}', ctx)).content).toBe('a/\ndangling-ok\ndangling-out\ndir-out\nlink-in\nlink-out\nloop-a\nloop-b\nsub/');
  });

  it.each([
    ['/etc/passwd', '/etc/passwd'],
    ['a ../ escape', '../secret.txt'],
    ['a deep ../ escape', 'sub/../../secret.txt'],
    ['a symlink leading out of the root', 'link-out'],
    ['a missing file outside (no existence oracle)', '/nonexistent/file'],
    ['a file under a symlinked folder leading out', 'dir-out/secret.txt'],
    ['a missing file under a symlinked folder leading out (no existence oracle)', 'dir-out/nonexistent'],
    ['a missing file deeper under it', 'dir-out/no/such/file'],
    ['a dangling symlink leading out (no oracle on its target)', 'dangling-out'],
    ['a symlink to an existing file outside', 'dangling-ok'],
  ])('refuses %s', async (_what, path) => {
    const t = toolbox({ files: { roots: [root] } });
    const r = await t.call('read_file', JSON.stringify({ path }), ctx);
    expect(r.error?.kind).toBe('refused');
    expect(r.content).toMatch(/^Error: Refused: .* is outside the folders this agent may read\.$/);
    expect(r.content).not.toContain('outside\n');
    const l = await t.call('list_dir', JSON.stringify({ path: '..' }), ctx);
    expect(l.error?.kind).toBe('refused');
  });

  it('`..` after a symlinked folder is taken as written, absolute or relative: names beside its target are neither read nor told apart', async () => {
    const t = toolbox({ files: { roots: [root] } });
    // outside-dir/secret.txt exists beside the link's target outside-dir/deep; nope.txt does not
    for (const base of [`${root}/a/b/deep-out/..`, 'a/b/deep-out/..']) { // (not join(): it would normalise)
      const existing = await t.call('read_file', JSON.stringify({ path: `${base}/secret.txt` }), ctx);
      const missing = await t.call('read_file', JSON.stringify({ path: `${base}/nope.txt` }), ctx);
      expect(existing.content).toBe(`Error: No such file or directory: ${base}/secret.txt`);
      expect(missing.content).toBe(`Error: No such file or directory: ${base}/nope.txt`);
    }
  });

  it('a link whose target wanders outside and comes back is refused, whatever exists out there (no oracle on outside folders)', async () => {
    const base = mkdtempSync(join(tmpdir(), 'hermes-wander-'));
    try {
      const r = join(base, 'root');
      mkdirSync(join(r, 'sub'), { recursive: true });
      writeFileSync(join(r, 'f'), 'INSIDE');
      mkdirSync(join(base, 'out', 'x'), { recursive: true }); // exists for `via-x`, not for `via-y`
      symlinkSync(`${base}/out/x/../../root/f`, join(r, 'via-x')); // (not join(): it would normalise)
      symlinkSync(`${base}/out/y/../../root/f`, join(r, 'via-y'));
      symlinkSync('../out/x/../../root/f', join(r, 'rel-via-x'));
      symlinkSync('../out/y/../../root/f', join(r, 'rel-via-y'));
      symlinkSync(join(r, 'f'), join(base, 'out', 'back')); // an outside link that points back in
      symlinkSync(join(base, 'out', 'back'), join(r, 'via-back'));
      symlinkSync(join(base, 'out', 'gone'), join(r, 'via-gone'));
      symlinkSync('f', join(r, 'inside-link'));
      const t = toolbox({ files: { roots: [r] } });
      for (const path of ['via-x', 'via-y', 'rel-via-x', 'rel-via-y', 'via-back', 'via-gone']) {
        const res = await t.call('read_file', JSON.stringify({ path }), ctx);
        expect(res.content, path).toBe(`Error: Refused: ${path} is outside the folders this agent may read.`);
      }
      // what stays inside still reads
      expect((await t.call('read_file', JSON.stringify({ path: 'inside-link' }), ctx)).content).toBe('INSIDE');
      expect((await t.call('read_file', JSON.stringify({ path: `${r}/sub/../f` }), ctx)).content).toBe('INSIDE');
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('refuses a path longer than 4096 characters before looking at it', async () => {
    const t = toolbox({ files: { roots: [root] } });
    const r = await t.call('read_file', JSON.stringify({ path: 'x/'.repeat(200_000) }), ctx);
    expect(r.content).toBe('Error: Refused: the path is longer than 4096 characters.');
  });

  it('refuses a FIFO inside a root at once instead of blocking on open (read_file and list_dir)', async () => {
    const fifo = join(root, 'pipe');
    execFileSync('mkfifo', [fifo]);
    try {
      const t = toolbox({ files: { roots: [root] }, timeout_seconds: 2 });
      const r = await t.call('read_file', JSON.stringify({ path: 'pipe' }), ctx);
      expect(r.error?.kind).toBe('refused');
      expect(r.content).toBe('Error: Refused: pipe is not a regular file.');
      const l = await t.call('list_dir', JSON.stringify({ path: 'pipe' }), ctx);
      expect(l.content).toBe('Error: pipe is not a folder.');
    } finally {
      // Without the fix the open above is still blocked in the threadpool: a
      // writer end opened here (non-blocking, so it fails rather than waits
      // when no reader is waiting) releases it.
      try {
        closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
      } catch {
        // no reader waiting: nothing to release
      }
      rmSync(fifo);
    }
  });

  it('cuts a result at tools.max_result_bytes and says so', async () => {
    writeFileSync(join(root, 'big.txt'), 'y'.repeat(50_000));
    const t = toolbox({ files: { roots: [root] }, max_result_bytes: 1000 });
    const r = await t.call('read_file', JSON.stringify({ path: 'big.txt' }), ctx);
    expect(r.truncated).toBe(true);
    expect(r.content).toBe(`${'y'.repeat(1000)}\n[result cut: first 1000 bytes shown; the tool returned more]`);
    rmSync(join(root, 'big.txt'));
  });
});

describe('http_get only to allowed hosts', () => {
  it('gets a page on a listed host, following a redirect that stays on listed hosts', async () => {
    const t = toolbox({ http: { allow: ['localhost'] } });
    const r = await t.call('http_get', JSON.stringify({ url: `http://localhost:${port}/redirect-in` }), ctx);
    expect(r.error).toBeUndefined();
    expect(r.content).toBe('HTTP 200 OK\ncontent-type: text/plain\n\nyou reached /ok');
  });

  it('refuses a host that is not listed', async () => {
    const t = toolbox({ http: { allow: ['localhost'] } });
    const r = await t.call('http_get', JSON.stringify({ url: `http://127.0.0.1:${port}/secret` }), ctx);
    expect(r.error?.kind).toBe('refused');
    expect(r.content).toBe(`Error: Refused: 127.0.0.1:${port} is not an allowed host.`);
  });

  it('refuses a listed host that redirects to 127.0.0.1', async () => {
    const t = toolbox({ http: { allow: [`localhost:${port}`] } });
    const r = await t.call('http_get', JSON.stringify({ url: `http://localhost:${port}/redirect-out` }), ctx);
    expect(r.error?.kind).toBe('refused');
    expect(r.content).toBe(`Error: Refused: 127.0.0.1:${port} is not an allowed host (reached by a redirect).`);
  });

  it('a listed IP address is fetched as listed (the operator named that exact address)', async () => {
    const t = toolbox({ http: { allow: ['127.0.0.1'] } });
    const r = await t.call('http_get', JSON.stringify({ url: `http://127.0.0.1:${port}/ok` }), ctx);
    expect(r.content).toBe('HTTP 200 OK\ncontent-type: text/plain\n\nyou reached /ok');
  });

  it.each([
    ['loopback', '127.0.0.1'],
    ['link-local metadata', '169.254.169.254'],
    ['IPv4-compatible IPv6 loopback', '::127.0.0.1'],
  ])('refuses a listed name whose DNS answer is %s, before connecting', async (_what, address) => {
    hits.length = 0;
    const answers: string[] = [];
    // A DNS that answers the listed name with an internal address (or re-points it there).
    const resolve: Resolver = (hostname, _options, callback) => {
      answers.push(hostname);
      callback(null, [{ address, family: address.includes(':') ? 6 : 4 }]);
    };
    const tool = httpTool(['ci.example.test'], { resolve });
    const call = tool.call({ url: `http://ci.example.test:${port}/secret` }, { ...ctx, maxResultBytes: 1000 });
    await expect(call).rejects.toThrow(`Refused: ci.example.test resolves to a ${httpGetRefusedReason(address, 'ci.example.test')} address (${address})`);
    await expect(call).rejects.toMatchObject({ kind: 'refused' });
    expect(answers).toEqual(['ci.example.test']);
    expect(hits).toEqual([]);
  });

  it('address rule: public and private (RFC 1918, unique-local) allowed for a listed name; loopback only for localhost; metadata never', () => {
    expect(httpGetRefusedReason('93.184.216.34', 'ci.example.com')).toBeUndefined();
    expect(httpGetRefusedReason('10.0.0.5', 'ci.example.com')).toBeUndefined();
    expect(httpGetRefusedReason('192.168.1.20', 'ci.example.com')).toBeUndefined();
    expect(httpGetRefusedReason('fd00::5', 'ci.example.com')).toBeUndefined();
    expect(httpGetRefusedReason('127.0.0.1', 'ci.example.com')).toBe('loopback');
    expect(httpGetRefusedReason('::ffff:127.0.0.1', 'ci.example.com')).toBe('loopback');
    expect(httpGetRefusedReason('127.0.0.1', 'localhost')).toBeUndefined();
    expect(httpGetRefusedReason('169.254.169.254', 'localhost')).toBe('linkLocal');
    expect(httpGetRefusedReason('0.0.0.0', 'ci.example.com')).toBe('unspecified');
    expect(httpGetRefusedReason('224.0.0.1', 'ci.example.com')).toBe('multicast');
    expect(httpGetRefusedReason('fe80::1', 'ci.example.com')).toBe('linkLocal');
  });

  it('caps the response body', async () => {
    const t = toolbox({ http: { allow: ['localhost'] }, max_result_bytes: 2000 });
    const r = await t.call('http_get', JSON.stringify({ url: `http://localhost:${port}/big` }), ctx);
    expect(r.truncated).toBe(true);
    expect(Buffer.byteLength(r.content)).toBeLessThan(2200);
  });
});

describe('command tools: arguments never become shell text', () => {
  it('a parameter "; touch /tmp/pwned" creates no file, for a shell-line command and for an argv command', async () => {
    const pwned = join(dir, 'pwned');
    const evil = `"; touch ${pwned}; echo "`;
    const t = toolbox({
      commands: {
        quoted: { command: 'echo "branch: $HERMES_ARG_BRANCH"', description: 'x', parameters: { type: 'object', properties: { branch: { type: 'string' } }, required: ['branch'] } },
        unquoted: { command: 'echo branch: $HERMES_ARG_BRANCH', description: 'x', parameters: { type: 'object', properties: { branch: { type: 'string' } } } },
        argv: { command: ['echo', 'branch: {branch}'], description: 'x', parameters: { type: 'object', properties: { branch: { type: 'string' } } } },
      },
    });
    for (const name of ['quoted', 'unquoted', 'argv']) {
      const r = await t.call(name, JSON.stringify({ branch: evil }), ctx);
      expect(r.error, name).toBeUndefined();
      expect(r.content, name).toContain(`touch ${pwned}`);
    }
    for (const payload of [`; touch ${pwned}`, `$(touch ${pwned})`, `\`touch ${pwned}\``]) {
      await t.call('quoted', JSON.stringify({ branch: payload }), ctx);
      await t.call('argv', JSON.stringify({ branch: payload }), ctx);
    }
    expect(existsSync(pwned)).toBe(false);
    const missing = await t.call('quoted', '{}', ctx);
    expect(missing.content).toBe('Error: Argument "branch" is required.');
  });

  it('an argument cannot become an option of an argv command ("-o /path" to sort writes no file); inside an element it stays a value', async () => {
    const pwned = join(dir, 'pwned-by-option');
    writeFileSync(join(dir, 'list.txt'), 'b\na\n');
    const t = toolbox({
      commands: {
        sort: { command: ['sort', '{file}'], description: 'sort a file', parameters: { type: 'object', properties: { file: { type: 'string' } } } },
        grep: { command: ['grep', '-e', '{pattern}', join(dir, 'list.txt')], description: 'x', parameters: { type: 'object', properties: { pattern: { type: 'string' } } } },
      },
    });
    for (const file of [`-o${pwned}`, `--output=${pwned}`]) {
      const r = await t.call('sort', JSON.stringify({ file }), ctx);
      expect(r.content).toBe('Error: Argument "file" may not begin with "-": the command would read it as an option.');
    }
    expect(existsSync(pwned)).toBe(false);
    expect((await t.call('sort', JSON.stringify({ file: join(dir, 'list.txt') }), ctx)).content).toBe('a\nb\n');
    // the rule does not know a program's options: even after the operator's own `-e` such a value is
    // refused (an operator who wants it writes `-e{pattern}`, one element that already is an option)
    const grep = await t.call('grep', JSON.stringify({ pattern: '-x' }), ctx);
    expect(grep.content).toBe('Error: Argument "pattern" may not begin with "-": the command would read it as an option.');
    // two placeholders: the one that brought the "-" is named; an unset name is empty, never Object's own
    const two = toolbox({
      commands: { echo2: { command: ['echo', '{first}{second}', 'x{constructor}y'], description: 'x', parameters: { type: 'object', properties: { first: { type: 'string' }, second: { type: 'string' } } } } },
    });
    expect((await two.call('echo2', JSON.stringify({ second: '-n' }), ctx)).content).toBe('Error: Argument "second" may not begin with "-": the command would read it as an option.');
    expect((await two.call('echo2', JSON.stringify({ first: 'a' }), ctx)).content).toBe('a xy\n');
  });

  it('a command tool never sees the worker\'s secrets', async () => {
    process.env.OPENAI_API_KEY_TEST_LEAK = 'sk-should-not-leak';
    process.env.GH_TOKEN_TEST = 'gh-passed-by-name';
    try {
      const t = toolbox({ commands: { env: { command: 'env', description: 'x', env: { GH_REPO: 'acme/api' }, pass_env: ['GH_TOKEN_TEST'] } } });
      const r = await t.call('env', '{}', ctx);
      expect(r.content).toContain('PATH=');
      expect(r.content).not.toContain('sk-should-not-leak');
      expect(r.content).toContain('HERMES_SESSION_ID=s');
      expect(r.content).toContain('GH_REPO=acme/api');
      expect(r.content).toContain('GH_TOKEN_TEST=gh-passed-by-name');
    } finally {
      delete process.env.OPENAI_API_KEY_TEST_LEAK;
      delete process.env.GH_TOKEN_TEST;
    }
  });

  it('the backstop is invisible to the command: no child of its own to wait for, and a PATH without sleep changes nothing', async () => {
    const t = toolbox({
      commands: {
        wait: { command: ['perl', '-e', 'print wait()'], description: 'x' },
        narrow: { command: ['/bin/sh', '-c', '/bin/sleep 0.2; echo done'], description: 'x', env: { PATH: '/nonexistent' } },
      },
    });
    const waited = await t.call('wait', '{}', ctx);
    // wait() finds no child at once: the watchdog is not the command's (else it waits past the tool's timeout)
    expect(waited.content).toBe('-1');
    expect((await t.call('narrow', '{}', ctx)).content).toBe('done\n');
  });

  it('what a command leaves running in the background ends when the command has exited', async () => {
    const t = toolbox({ commands: { bg: { command: 'sleep 600 >/dev/null 2>&1 & echo $!', description: 'x' } } });
    const r = await t.call('bg', '{}', ctx);
    const pid = Number(r.content.trim());
    expect(pid).toBeGreaterThan(0);
    await waitFor(() => {
      try {
        process.kill(pid, 0);
        return undefined;
      } catch {
        return true;
      }
    }, 5_000, 'the left-behind sleep ended');
  });

  it('a non-zero exit is an error the model sees, with the end of stderr', async () => {
    const t = toolbox({ commands: { bad: { command: 'echo oops >&2; exit 3', description: 'x' } } });
    const r = await t.call('bad', '{}', ctx);
    expect(r.error?.kind).toBe('failed');
    expect(r.content).toBe('Error: Exit code 3: oops');
  });
});

describe('undeclared tools', () => {
  it('a name that is not declared runs nothing', async () => {
    const t = toolbox({});
    expect(t.all().map((x) => x.name)).toEqual(['schedule_status']);
    const r = await t.call('read_file', JSON.stringify({ path: '/etc/passwd' }), ctx);
    expect(r.content).toBe('Error: Unknown tool "read_file": only the tools listed for this turn exist.');
  });
});
