/**
 * What the operator's tools may reach, as rules over text alone (no I/O), shared by the tools
 * (`worker/tools/`) and by the check of a `--watch` when it is set
 * (`scheduler/economy/economy-check.ts`), so a watch is refused when set by the rule its tool
 * applies at every run:
 *   - files: a path inside one of `tools.files.roots` (`pathWithin`; a sibling whose name only
 *     starts like a root, `/srv/ci-secrets` for `/srv/ci`, is outside). The tools resolve real
 *     paths and symlinks at every call besides (`worker/tools/file-tools.ts`);
 *   - HTTP: a URL whose host is on `tools.http.allow` (`hostAllowed`).
 */
import { isAbsolute, relative, sep } from 'node:path';

/** Whether `path` is `folder` or lies under it (both absolute and normalised). */
export function pathWithin(path: string, folder: string): boolean {
  const rel = relative(folder, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/** One `tools.http.allow` entry: a host as the URL parser writes it (IPv6 in brackets), and a port or any. */
export interface AllowEntry {
  host: string;
  port?: number;
}

/**
 * Read one allow entry: `name`, `name:port`, an IPv4 address with or without
 * a port, an IPv6 address bracketed (`[::1]`, `[::1]:8080`) or bare (`::1`,
 * any port; bracket it to name one). The host goes through the same URL
 * parser as the URLs it is matched against, so case, IDN, IPv4 spellings
 * (`127.1`) and IPv6 spellings (`0:0:0:0:0:0:0:1`) compare as the URL's do.
 * @returns undefined for an entry that is no host (it matches nothing)
 */
export function parseAllowEntry(entry: string): AllowEntry | undefined {
  const e = entry.trim();
  const bracketed = /^(\[[^\]]+\])(?::(\d{1,5}))?$/.exec(e);
  const bareIpv6 = !bracketed && (e.match(/:/g) ?? []).length > 1;
  const named = /^([^:]+)(?::(\d{1,5}))?$/.exec(e);
  const host = bracketed ? bracketed[1] : bareIpv6 ? `[${e}]` : named?.[1];
  const port = bracketed ? bracketed[2] : bareIpv6 ? undefined : named?.[2];
  if (host === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(`http://${host}/`);
  } catch {
    return undefined;
  }
  // Anything but a bare host (a user, a path, a port inside the host part) is not an entry.
  if (
    parsed.username !== '' ||
    parsed.password !== '' ||
    parsed.port !== '' ||
    parsed.pathname !== '/' ||
    parsed.search !== '' ||
    parsed.hash !== ''
  ) {
    return undefined;
  }
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) return undefined;
  return { host: parsed.hostname, ...(port !== undefined ? { port: Number(port) } : {}) };
}

/** The port a URL connects to: its own, else its scheme's default (443 for https, 80 for http). */
function effectivePort(url: URL): number {
  if (url.port !== '') return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}

/**
 * True when `url`'s host is on the allow list: an entry without a port
 * matches any port, `host:port` only that port — the default port included
 * (`host:443` allows `https://host/…`, `host:80` allows `http://host/…`).
 */
export function hostAllowed(url: URL, allow: readonly string[]): boolean {
  const host = url.hostname.toLowerCase();
  const port = effectivePort(url);
  return allow.some((a) => {
    const entry = parseAllowEntry(a);
    return entry !== undefined && entry.host === host && (entry.port === undefined || entry.port === port);
  });
}
