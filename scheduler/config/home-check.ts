/**
 * Whose `HERMES_HOME` and `config.yaml` a process trusts. `config.yaml` declares the commands a
 * worker runs as tools and holds keys; whoever can write it, or can write the folder it is in (and
 * so replace it), decides what runs as this user. So before the file is read, both must belong to
 * this user (or to root, who can change anything of any user anyway) and neither may be writable by
 * group or others. Anything else stops the start with a `ConfigError` saying what to run; the CLI
 * exits 2, as for any bad configuration. Readable by others is allowed here: it is the owner's choice,
 * and the long-running processes warn about a readable `config.yaml` (`configFileWarning`).
 * A home that does not exist yet has nothing to check (it is created 0700 when first used).
 */
import { statSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../errors/config-error.ts';
import { currentUid, modeText } from '../private-files.ts';

/** Mode bits that let group or others write. */
const WRITABLE_BY_OTHERS = 0o022;

/** `stat` (symlinks followed: what is read is the target), or `undefined` when nothing is there. */
function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function writers(mode: number): string {
  return (mode & 0o002) !== 0 ? 'others' : 'its group';
}

/**
 * Refuse a home or `config.yaml` another user owns or group or others may write (see above).
 * @param uid - the user the process runs as (default: this process's)
 * @throws ConfigError naming the path, its owner or mode, and the command that fixes it
 */
export function assertTrustedHome(home: string, uid: number = currentUid()): void {
  const trusted = (st: Stats) => st.uid === uid || st.uid === 0;
  const dir = statOrUndefined(home);
  if (!dir) return;
  if (!dir.isDirectory()) throw new ConfigError(`HERMES_HOME ${home} is not a folder; point HERMES_HOME at a folder of yours.`);
  if (!trusted(dir)) {
    throw new ConfigError(
      `HERMES_HOME ${home} belongs to uid ${dir.uid}, not to this user (uid ${uid}): its config.yaml would decide what runs as you. ` +
        `Use a home of your own (HERMES_HOME), or take this one over: chown -R ${uid} ${home} && chmod 700 ${home}`,
    );
  }
  if ((dir.mode & WRITABLE_BY_OTHERS) !== 0) {
    throw new ConfigError(
      `HERMES_HOME ${home} is writable by ${writers(dir.mode)} (mode ${modeText(dir.mode)}): whoever can write there can replace config.yaml and the commands it declares. ` +
        `Fix: chmod 700 ${home}`,
    );
  }
  const file = join(home, 'config.yaml');
  const st = statOrUndefined(file);
  if (!st) return;
  if (!trusted(st)) {
    throw new ConfigError(
      `${file} belongs to uid ${st.uid}, not to this user (uid ${uid}): it would declare another user's keys and command tools. ` +
        `Check what it holds, then: chown ${uid} ${file} && chmod 600 ${file} (or remove it)`,
    );
  }
  if ((st.mode & WRITABLE_BY_OTHERS) !== 0) {
    throw new ConfigError(
      `${file} is writable by ${writers(st.mode)} (mode ${modeText(st.mode)}): whoever can write it decides the commands a worker runs. ` +
        `Fix: chmod 600 ${file}`,
    );
  }
}
