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
import { ConfigError } from '../scheduler/errors/config-error.ts';
import { httpGetRefusedReason } from '../worker/tools/http-tool-policy.ts';
import type { Resolver } from '../worker/runtime/guarded-lookup.ts';
import { httpTool } from '../worker/tools/http-tool.ts';
import { hostAllowed, parseAllowEntry } from '../scheduler/tools/tool-reach.ts';
import { Toolbox } from '../worker/tools/toolbox.ts';
import { ToolOutput } from '../worker/tools/tool-output.ts';
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
  mkdirSync(join(dir, 'root-secrets'));
  writeFileSync(join(dir, 'root-secrets', 'secret.txt'), 'outside');
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
    expect((await t.call('list_dir', '{}', ctx)).content).toBe(
      'a/\ndangling-ok\ndangling-out\ndir-out\nlink-in\nlink-out\nloop-a\nloop-b\nsub/',
    );
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
    // near misses of the root check: a sibling whose name only starts like the root
    ['a sibling folder named like the root (absolute)', 'ROOT-secrets/secret.txt'],
    ['a sibling folder named like the root (relative)', '../root-secrets/secret.txt'],
    ['a `..` that normalises to the sibling', 'sub/../../root-secrets/secret.txt'],
  ])('refuses %s', async (_what, written) => {
    const path = written.replace(/^ROOT/, root);
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
    for (const base of [`${root}/a/b/deep-out/..`, 'a/b/deep-out/..']) {
      // (not join(): it would normalise)
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

  it('a result over tools.max_result_bytes keeps its head and its tail, the marker naming the lines left out and how to read them', async () => {
    const text = `${Array.from({ length: 2000 }, (_, i) => `line ${i + 1}`).join('\n')}\nBUILD STATUS: green\n`;
    writeFileSync(join(root, 'big.txt'), text);
    const t = toolbox({ files: { roots: [root] }, max_result_bytes: 1000 });
    const r = await t.call('read_file', JSON.stringify({ path: 'big.txt' }), ctx);
    expect(r).toMatchObject({ truncated: true, bytes: Buffer.byteLength(text) });
    const marker =
      /\n\[… ([\d,]+) of ([\d,]+) bytes \(lines ([\d,]+)–([\d,]+)\) left out; read them with read_file offset=(\d+) limit=(\d+), or the end with tail_lines …\]\n/.exec(
        r.content,
      );
    expect(marker).not.toBeNull();
    const [leftOut, total, from, to, offset, limit] = marker!.slice(1).map((g) => Number(g.replace(/,/g, ''))) as [
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    const head = r.content.slice(0, marker!.index + 1);
    const tail = r.content.slice(marker!.index + marker![0].length);
    // Most of the room to the tail (result_head_share 0.25), each cut at a line end; the verdict kept.
    expect(head.startsWith('line 1\nline 2\n')).toBe(true);
    expect(Buffer.byteLength(head)).toBeLessThanOrEqual(250);
    expect(Buffer.byteLength(tail)).toBeLessThanOrEqual(750);
    expect(Buffer.byteLength(tail)).toBeGreaterThan(600);
    expect(tail.endsWith('line 2000\nBUILD STATUS: green\n')).toBe(true);
    expect(total).toBe(Buffer.byteLength(text));
    expect(leftOut).toBe(total - Buffer.byteLength(head) - Buffer.byteLength(tail));
    // The lines named are exactly the ones missing, and the paging call it names reads them.
    expect(head.endsWith(`line ${from - 1}\n`)).toBe(true);
    expect(tail.startsWith(`line ${to + 1}\n`)).toBe(true);
    expect([offset, limit]).toEqual([from, to - from + 1]);
    const page = await t.call('read_file', JSON.stringify({ path: 'big.txt', offset: from, limit: 3 }), ctx);
    expect(page.content).toBe(`line ${from}\nline ${from + 1}\nline ${from + 2}\n`);
    rmSync(join(root, 'big.txt'));
  });

  it('read_file pages: offset/limit in lines, tail_lines, a page over the cap numbered from its own start; bad paging refused', async () => {
    const text = Array.from({ length: 500 }, (_, i) => `row ${i + 1}`).join('\n'); // no line end after the last line
    writeFileSync(join(root, 'rows.txt'), text);
    const t = toolbox({ files: { roots: [root] }, max_result_bytes: 400 });
    const read = async (args: Record<string, unknown>) => await t.call('read_file', JSON.stringify({ path: 'rows.txt', ...args }), ctx);
    expect((await read({ offset: 10, limit: 2 })).content).toBe('row 10\nrow 11\n');
    expect((await read({ offset: 499 })).content).toBe('row 499\nrow 500');
    expect((await read({ limit: 1 })).content).toBe('row 1\n');
    expect((await read({ tail_lines: 2 })).content).toBe('row 499\nrow 500');
    expect((await read({ tail_lines: 1_000 })).truncated).toBe(true); // the whole file, cut as a whole read is
    expect((await read({ offset: 501 })).content).toBe('[Line 501 is past the end of the file: it has 500 lines.]');
    // A page larger than the cap keeps its head and tail; the marker's lines are the file's.
    const page = await read({ offset: 100, limit: 200 });
    expect(page.content.startsWith('row 100\n')).toBe(true);
    expect(page.content.endsWith('row 299\n')).toBe(true);
    const [, from, to] = /lines (\d+)–(\d+)\) left out/.exec(page.content)!.map(Number);
    expect(page.content).toContain(`row ${from! - 1}\n[…`);
    expect(page.content).toContain(`…]\nrow ${to! + 1}\n`);
    const tail = await read({ tail_lines: 100 });
    expect(tail.content.startsWith('row 401\n')).toBe(true);
    expect(tail.content).toMatch(/lines 4\d\d–4\d\d\) left out/);
    for (const bad of [{ offset: 0 }, { limit: -1 }, { offset: 1.5 }, { tail_lines: '3' }, { offset: 2, tail_lines: 3 }]) {
      const r = await read(bad);
      expect(r.error?.kind, JSON.stringify(bad)).toBe('refused');
      expect(r.content).toMatch(
        /^Error: (Argument "\w+" must be a whole number of lines, 1 or more\.|Use either offset and limit, or tail_lines\.)$/,
      );
    }
    // The schema the model is given documents the paging.
    const schema = t.definitions('chat').find((d) => d.function.name === 'read_file')!.function.parameters as {
      properties: Record<string, { type: string; description: string }>;
    };
    expect(Object.keys(schema.properties)).toEqual(['path', 'offset', 'limit', 'tail_lines']);
    expect(schema.properties.tail_lines!.type).toBe('integer');
    rmSync(join(root, 'rows.txt'));
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
    const output = new ToolOutput({ maxBytes: 1000, headShare: 0.25, fileReadBytes: 1 << 20 });
    const call = tool.call({ url: `http://ci.example.test:${port}/secret` }, { ...ctx, output });
    await expect(call).rejects.toThrow(
      `Refused: ci.example.test resolves to a ${httpGetRefusedReason(address, 'ci.example.test')} address (${address})`,
    );
    await expect(call).rejects.toMatchObject({ kind: 'refused' });
    expect(answers).toEqual(['ci.example.test']);
    expect(hits).toEqual([]);
  });

  it.each([
    ['public first, loopback second', ['93.184.216.34', '127.0.0.1']],
    ['loopback first, public second', ['127.0.0.1', '93.184.216.34']],
    ['public first, metadata second', ['93.184.216.34', '169.254.169.254']],
  ])('refuses a listed name whose DNS answers hold an internal address among public ones (%s)', async (_what, addresses) => {
    hits.length = 0;
    const resolve: Resolver = (_hostname, _options, callback) => {
      callback(
        null,
        addresses.map((address) => ({ address, family: 4 })),
      );
    };
    const tool = httpTool(['ci.example.test'], { resolve });
    const output = new ToolOutput({ maxBytes: 1000, headShare: 0.25, fileReadBytes: 1 << 20 });
    const call = tool.call({ url: `http://ci.example.test:${port}/secret` }, { ...ctx, output });
    await expect(call).rejects.toMatchObject({ kind: 'refused' });
    await expect(call).rejects.toThrow(/^Refused: ci\.example\.test resolves to a (loopback|linkLocal) address/);
    expect(hits).toEqual([]);
  });

  it.each([
    ['a name that only ends like the listed one', 'http://evilapi.example.com/'],
    ['the listed name followed by another domain', 'http://api.example.com.evil.net/'],
    ['the listed name as userinfo before another host', 'http://api.example.com@evil.net/'],
    ['the listed name as userinfo before a loopback address', 'http://api.example.com@127.0.0.1:PORT/secret'],
    ['a parent of the listed name', 'http://example.com/'],
  ])('host near misses are not the listed host: %s', async (_what, written) => {
    const url = written.replace('PORT', String(port));
    expect(hostAllowed(new URL(url), ['api.example.com'])).toBe(false);
    hits.length = 0;
    const t = toolbox({ http: { allow: ['api.example.com'] } });
    const r = await t.call('http_get', JSON.stringify({ url }), ctx);
    expect(r.error?.kind).toBe('refused');
    expect(r.content).toBe(`Error: Refused: ${new URL(url).host} is not an allowed host.`);
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

  it("an entry with a port matches a URL without one when it is the scheme's default (host:443 is https://host/, host:80 is http://host/)", () => {
    const allowed = (url: string, allow: string[]) => hostAllowed(new URL(url), allow);
    expect(allowed('https://api.example.com/repos', ['api.example.com:443'])).toBe(true);
    expect(allowed('https://api.example.com:443/repos', ['api.example.com:443'])).toBe(true);
    expect(allowed('http://api.example.com/repos', ['api.example.com:80'])).toBe(true);
    expect(allowed('HTTPS://API.Example.COM/', ['Api.Example.com:443'])).toBe(true);
    // the default is the scheme's own: 443 is not http's, 80 is not https's
    expect(allowed('http://api.example.com/', ['api.example.com:443'])).toBe(false);
    expect(allowed('https://api.example.com/', ['api.example.com:80'])).toBe(false);
    expect(allowed('https://api.example.com:8443/', ['api.example.com:443'])).toBe(false);
    // a name alone still matches any port; a port still only its own
    expect(allowed('https://api.example.com:8443/', ['api.example.com'])).toBe(true);
    expect(allowed('https://api.example.com:8443/', ['api.example.com:8443'])).toBe(true);
    expect(allowed('https://api.example.com:8444/', ['api.example.com:8443'])).toBe(false);
    // IPv4 entries, spelled as the URL parser spells them
    expect(allowed('http://127.0.0.1/', ['127.0.0.1:80'])).toBe(true);
    expect(allowed('http://127.1:8080/', ['127.0.0.1:8080'])).toBe(true);
    // what is no host matches nothing
    for (const entry of [
      'user@api.example.com',
      'api.example.com/path',
      'https://api.example.com',
      'api.example.com:0',
      'api.example.com:99999',
      '',
    ]) {
      expect(allowed('https://api.example.com/', [entry]), entry).toBe(false);
    }
  });

  it('IPv6 entries, bracketed with or without a port, or bare (any port)', () => {
    const allowed = (url: string, allow: string[]) => hostAllowed(new URL(url), allow);
    expect(allowed('http://[::1]:8080/', ['[::1]:8080'])).toBe(true);
    expect(allowed('http://[::1]:8081/', ['[::1]:8080'])).toBe(false);
    expect(allowed('http://[::1]:8081/', ['[::1]'])).toBe(true);
    expect(allowed('http://[::1]:8081/', ['::1'])).toBe(true);
    expect(allowed('http://[0:0:0:0:0:0:0:1]/', ['::1'])).toBe(true);
    expect(allowed('http://[::1]/', ['0:0:0:0:0:0:0:1'])).toBe(true);
    expect(allowed('https://[2001:db8::10]/', ['[2001:DB8::10]:443'])).toBe(true);
    expect(allowed('http://[2001:db8::10]/', ['[2001:db8::10]:443'])).toBe(false);
    expect(allowed('http://[fd00::1]/', ['::1'])).toBe(false);
    expect(parseAllowEntry('[::1]:8080')).toEqual({ host: '[::1]', port: 8080 });
    expect(parseAllowEntry('::1')).toEqual({ host: '[::1]' });
    expect(parseAllowEntry('api.example.com:443')).toEqual({ host: 'api.example.com', port: 443 });
  });

  it('fetches for real: host:80 with a URL without a port, and an IPv6 loopback listed bracketed or bare', async () => {
    // host:80 — a server on port 80 if this process may bind it (root), else: not refused as a host
    const on80 = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(`port 80 ${req.url}`));
    const bound80 = await new Promise<boolean>((r) => on80.once('error', () => r(false)).listen(80, '127.0.0.1', () => r(true)));
    try {
      const r = await toolbox({ http: { allow: ['127.0.0.1:80'] } }).call('http_get', JSON.stringify({ url: 'http://127.0.0.1/ok' }), ctx);
      if (bound80) expect(r.content).toBe('HTTP 200 OK\ncontent-type: text/plain\n\nport 80 /ok');
      else expect(r.content).not.toContain('not an allowed host');
    } finally {
      if (bound80) await new Promise<void>((r) => on80.close(() => r()));
    }
    // IPv6 loopback
    const v6 = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(`v6 ${req.url}`));
    const bound6 = await new Promise<boolean>((r) => v6.once('error', () => r(false)).listen(0, '::1', () => r(true)));
    if (!bound6) return; // no IPv6 loopback here: the matching itself is tested above
    try {
      const p6 = (v6.address() as AddressInfo).port;
      for (const entry of [`[::1]:${p6}`, '[::1]', '::1']) {
        const r = await toolbox({ http: { allow: [entry] } }).call('http_get', JSON.stringify({ url: `http://[::1]:${p6}/ok` }), ctx);
        expect(r.content, entry).toBe('HTTP 200 OK\ncontent-type: text/plain\n\nv6 /ok');
      }
      const other = await toolbox({ http: { allow: [`[::1]:${p6 === 65535 ? 1 : p6 + 1}`] } }).call(
        'http_get',
        JSON.stringify({ url: `http://[::1]:${p6}/ok` }),
        ctx,
      );
      expect(other.content).toBe(`Error: Refused: [::1]:${p6} is not an allowed host.`);
    } finally {
      await new Promise<void>((r) => v6.close(() => r()));
    }
  });
});

describe('command tools: arguments never become shell text', () => {
  it('a parameter "; touch /tmp/pwned" creates no file, for a shell-line command and for an argv command', async () => {
    const pwned = join(dir, 'pwned');
    const evil = `"; touch ${pwned}; echo "`;
    const t = toolbox({
      commands: {
        quoted: {
          command: 'echo "branch: $HERMES_ARG_BRANCH"',
          description: 'x',
          parameters: { type: 'object', properties: { branch: { type: 'string' } }, required: ['branch'] },
        },
        unquoted: {
          command: 'echo branch: $HERMES_ARG_BRANCH',
          description: 'x',
          parameters: { type: 'object', properties: { branch: { type: 'string' } } },
        },
        argv: {
          command: ['echo', 'branch: {branch}'],
          description: 'x',
          parameters: { type: 'object', properties: { branch: { type: 'string' } } },
        },
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
        sort: {
          command: ['sort', '{file}'],
          description: 'sort a file',
          parameters: { type: 'object', properties: { file: { type: 'string' } } },
        },
        grep: {
          command: ['grep', '-e', '{pattern}', join(dir, 'list.txt')],
          description: 'x',
          parameters: { type: 'object', properties: { pattern: { type: 'string' } } },
        },
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
      commands: {
        echo2: {
          command: ['echo', '{first}{second}', 'x{constructor}y'],
          description: 'x',
          parameters: { type: 'object', properties: { first: { type: 'string' }, second: { type: 'string' } } },
        },
      },
    });
    expect((await two.call('echo2', JSON.stringify({ second: '-n' }), ctx)).content).toBe(
      'Error: Argument "second" may not begin with "-": the command would read it as an option.',
    );
    expect((await two.call('echo2', JSON.stringify({ first: 'a' }), ctx)).content).toBe('a xy\n');
  });

  it("a command tool never sees the worker's secrets", async () => {
    process.env.OPENAI_API_KEY_TEST_LEAK = 'sk-should-not-leak';
    process.env.GH_TOKEN_TEST = 'gh-passed-by-name';
    try {
      const t = toolbox({
        commands: { env: { command: 'env', description: 'x', env: { GH_REPO: 'acme/api' }, pass_env: ['GH_TOKEN_TEST'] } },
      });
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
    await waitFor(
      () => {
        try {
          process.kill(pid, 0);
          return undefined;
        } catch {
          return true;
        }
      },
      5_000,
      'the left-behind sleep ended',
    );
  });

  it('a non-zero exit is an error the model sees, with the end of stderr', async () => {
    const t = toolbox({ commands: { bad: { command: 'echo oops >&2; exit 3', description: 'x' } } });
    const r = await t.call('bad', '{}', ctx);
    expect(r.error?.kind).toBe('failed');
    expect(r.content).toBe('Error: Exit code 3: oops');
  });
});

describe('command tools: arguments are checked against the declared JSON Schema before anything runs', () => {
  const deploySchema = {
    type: 'object',
    properties: {
      env: { type: 'string', enum: ['staging'] },
      ref: { type: 'string', pattern: '^[a-z0-9][a-z0-9/._-]*$' },
    },
    required: ['env'],
    additionalProperties: false,
  };

  it('enum [staging]: {"env":"production","extra":"x"} spawns nothing and the model sees why; valid arguments still run', async () => {
    const marker = join(dir, 'deploy-ran');
    rmSync(marker, { force: true });
    const t = toolbox({
      commands: {
        deploy: { command: `touch ${marker}; echo "deploying-to $HERMES_ARG_ENV"`, description: 'x', parameters: deploySchema },
        deploy_argv: {
          command: ['sh', '-c', `touch ${marker}; echo "deploying-to $1"`, 'sh', '{env}'],
          description: 'x',
          parameters: deploySchema,
        },
      },
    });
    const refusals: [string, string][] = [
      ['{"env":"production","extra":"x"}', 'Error: Argument "extra" is not declared (additionalProperties: false).'],
      ['{"env":"production"}', 'Error: Argument "env" must be one of "staging" (enum).'],
      ['{"env":"staging","extra":"x"}', 'Error: Argument "extra" is not declared (additionalProperties: false).'],
      ['{"env":["staging"]}', 'Error: Argument "env" must be a string, not an array (type).'],
      ['{"env":{"name":"staging"}}', 'Error: Argument "env" must be a string, not an object (type).'],
      ['{"env":1}', 'Error: Argument "env" must be a string, not a number (type).'],
      ['{"env":null}', 'Error: Argument "env" must be a string, not null (type).'],
      ['{"env":"staging","ref":"main; touch x"}', 'Error: Argument "ref" must match the pattern ^[a-z0-9][a-z0-9/._-]*$ (pattern).'],
      ['{"env":"staging","ref":"--output=/etc/x"}', 'Error: Argument "ref" must match the pattern ^[a-z0-9][a-z0-9/._-]*$ (pattern).'],
      ['{}', 'Error: Argument "env" is required.'],
    ];
    for (const name of ['deploy', 'deploy_argv']) {
      for (const [args, message] of refusals) {
        const r = await t.call(name, args, ctx);
        expect(r.error?.kind, `${name} ${args}`).toBe('refused');
        expect(r.content, `${name} ${args}`).toBe(message);
      }
    }
    expect(existsSync(marker)).toBe(false);
    for (const name of ['deploy', 'deploy_argv']) {
      const ok = await t.call(name, '{"env":"staging","ref":"release/1.2"}', ctx);
      expect(ok.error).toBeUndefined();
      expect(ok.content).toBe('deploying-to staging\n');
    }
    expect(existsSync(marker)).toBe(true);
  });

  it('an undeclared argument cannot overwrite a checked one through its variable name ("env" and "ENV" are both HERMES_ARG_ENV)', async () => {
    const marker = join(dir, 'collide-ran');
    const t = toolbox({
      commands: {
        open_schema: {
          command: `touch ${marker}; echo "$HERMES_ARG_ENV"`,
          description: 'x',
          parameters: { type: 'object', properties: { env: { type: 'string', enum: ['staging'] } }, required: ['env'] },
        },
      },
    });
    for (const args of [
      '{"env":"staging","ENV":"production"}',
      '{"ENV":"production","env":"staging"}',
      '{"env":"staging","e-n-v":"x","e_n_v":"y"}',
    ]) {
      const r = await t.call('open_schema', args, ctx);
      expect(r.error?.kind, args).toBe('refused');
      expect(r.content, args).toMatch(/^Error: Arguments "[^"]+" and "[^"]+" would both be HERMES_ARG_[A-Z_]+; send one of them\.$/);
    }
    expect(existsSync(marker)).toBe(false);
    // without additionalProperties: false, an extra argument with a name of its own still passes (JSON Schema's default)
    expect((await t.call('open_schema', '{"env":"staging","note":"x"}', ctx)).content).toBe('staging\n');
  });

  it('a tool without parameters takes no arguments', async () => {
    const t = toolbox({ commands: { disk: { command: 'echo ok', description: 'x' } } });
    expect((await t.call('disk', '{}', ctx)).content).toBe('ok\n');
    expect((await t.call('disk', '{"path":"/"}', ctx)).content).toBe(
      'Error: Argument "path" is not declared (additionalProperties: false).',
    );
  });

  it.each([
    ['a misspelt type', { type: 'object', properties: { env: { type: 'strin' } } }, /must be equal to one of the allowed values/],
    [
      'an unknown keyword (a rule that would check nothing)',
      { type: 'object', properties: { env: { type: 'string', enums: ['staging'] } } },
      /unknown keyword: "enums"/,
    ],
    ['a format (not checked here)', { type: 'object', properties: { day: { type: 'string', format: 'date' } } }, /unknown format "date"/],
    [
      'a pattern that is not a regular expression',
      { type: 'object', properties: { env: { type: 'string', pattern: '([a-z' } } },
      /Invalid regular expression/,
    ],
    [
      'an unresolvable $ref',
      { type: 'object', properties: { env: { $ref: 'https://example.com/schema.json' } } },
      /can't resolve reference/,
    ],
    ['a top level that is not an object', { type: 'string' }, /must be a JSON Schema with type: object/],
  ])('an invalid declared schema is a config error when the tools are built, naming the tool: %s', (_what, parameters, reason) => {
    let error: unknown;
    try {
      toolbox({ commands: { deploy: { command: 'echo x', description: 'x', parameters } } });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).key).toBe('tools.commands.deploy.parameters');
    expect((error as Error).message).toMatch(/^tools\.commands\.deploy\.parameters: the parameters of tool "deploy" /);
    expect((error as Error).message).toMatch(reason);
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
