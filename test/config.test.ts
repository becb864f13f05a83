/** Configuration (docs/DESIGN.md §10): defaults, file, environment, clear errors naming the key. */
import { describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { configDefaults, configSchema, loadConfig } from '../scheduler/config/config.ts';
import { ConfigError } from '../scheduler/errors/config-error.ts';
import { tempDirsRemovedAfterAll } from './support/temp-dirs.ts';

const home = tempDirsRemovedAfterAll('hermes-config-');

describe('loadConfig', () => {
  it('has the defaults of docs/DESIGN.md', () => {
    const c = loadConfig({ env: { HERMES_HOME: home() } });
    expect(c.loops).toMatchObject({
      min_interval_seconds: 30,
      max_ticks: 100,
      self_paced_floor_seconds: 60,
      self_paced_ceiling_seconds: 900,
      max_consecutive_failures: 3,
    });
    expect(c.goals.max_turns).toBe(20);
    expect(c.heartbeat.min_interval_seconds).toBe(60);
    expect(c.agent.cron_drain_timeout).toBe(30);
    expect(c.agent.restart_drain_timeout).toBe(0);
    expect(c.api_server).toMatchObject({ host: '127.0.0.1', port: 8642 });
    expect(c.redis.prefix).toBe('{hermes}');
  });

  it('reads config.yaml and lets the environment override every key', () => {
    const h = home();
    writeFileSync(
      join(h, 'config.yaml'),
      'loops:\n  max_ticks: 7\ntimezone: Europe/Warsaw\ncommands:\n  ci:\n    command: "gh run list"\n',
    );
    const c = loadConfig({
      env: {
        HERMES_HOME: h,
        HERMES_LOOPS_MIN_INTERVAL_SECONDS: '5',
        REDIS_URL: 'redis://r:6379',
        TELEGRAM_ALLOWED_USERS: '1, 22',
        API_SERVER_KEY: 'k',
      },
    });
    expect(c.loops.max_ticks).toBe(7);
    expect(c.loops.min_interval_seconds).toBe(5);
    expect(c.timezone).toBe('Europe/Warsaw');
    expect(c.commands.ci).toEqual({ command: 'gh run list', timeout_seconds: 60, env: {}, pass_env: [] });
    expect(c.redis.url).toBe('redis://r:6379');
    expect(c.telegram.allowed_users).toEqual(['1', '22']);
    expect(c.api_server.key).toBe('k');
  });

  it('a list is a YAML list or a comma list in the environment: entries trimmed, empty ones dropped, each still validated', () => {
    const env = {
      HERMES_HOME: home(),
      HERMES_REDIS_SHARDS: '8',
      HERMES_WORKER_SHARDS: '0, 2,,4 ',
      HERMES_GATEWAY_RECONNECT_BACKOFF_SECONDS: ' 5 ,10',
      HERMES_COMMAND_ENV_PASS: 'AWS_PROFILE , GH_TOKEN,',
      HERMES_DELIVERY_WEBHOOK_ALLOW: '10.0.0.0/8, hooks.internal',
    };
    const c = loadConfig({ env });
    expect(c.worker.shards).toEqual([0, 2, 4]);
    expect(c.gateway.reconnect_backoff_seconds).toEqual([5, 10]);
    expect(c.command_env.pass).toEqual(['AWS_PROFILE', 'GH_TOKEN']);
    expect(c.delivery.webhook_allow).toEqual(['10.0.0.0/8', 'hooks.internal']);
    const h = home();
    writeFileSync(
      join(h, 'config.yaml'),
      'telegram:\n  allowed_users: [123, " 456 ", ""]\nslack:\n  allowed_users: "U1, W2,"\ndiscord:\n  allowed_users: [" 80351110224678912 "]\ntools:\n  schedules:\n    allow_from: "cli, chat"\nredis:\n  shards: 4\nworker:\n  shards: [1, 3]\n',
    );
    const y = loadConfig({ env: { HERMES_HOME: h } });
    expect(y.telegram.allowed_users).toEqual(['123', '456']);
    expect(y.slack.allowed_users).toEqual(['U1', 'W2']);
    expect(y.discord.allowed_users).toEqual(['80351110224678912']);
    expect(y.tools.schedules.allow_from).toEqual(['cli', 'chat']);
    expect(y.worker.shards).toEqual([1, 3]);
    // an unquoted id past 2^53 has lost digits by the time YAML hands it over: refused, naming the fix
    const big = home();
    writeFileSync(join(big, 'config.yaml'), 'discord:\n  allowed_users: [80351110224678912]\n');
    expect(() => loadConfig({ env: { HERMES_HOME: big } })).toThrow(/discord\.allowed_users\.0 .*quote the id in config\.yaml/);
    expect(() => loadConfig({ env: { ...env, HERMES_COMMAND_ENV_PASS: 'GOOD, not-a-name' } })).toThrow(
      /command_env\.pass\.1 \(from HERMES_COMMAND_ENV_PASS\): must be environment variable names/,
    );
    expect(() => loadConfig({ env: { ...env, HERMES_GATEWAY_RECONNECT_BACKOFF_SECONDS: ' , ' } })).toThrow(
      /gateway\.reconnect_backoff_seconds \(from HERMES_GATEWAY_RECONNECT_BACKOFF_SECONDS\)/,
    );
  });

  it('a number setting typed as text is named as typed, not "received NaN"', () => {
    const err = (() => {
      try {
        loadConfig({ env: { HERMES_HOME: home(), HERMES_LOOPS_MAX_TICKS: 'abc' } });
      } catch (e) {
        return e as Error;
      }
    })();
    expect(err?.message).toBe('Invalid setting loops.max_ticks (from HERMES_LOOPS_MAX_TICKS): expected a number, got "abc"');
    expect(err?.message).not.toContain('NaN');
  });

  it('tools.files.roots must be absolute: a relative root is refused at load, naming the key', () => {
    const h = home();
    writeFileSync(join(h, 'config.yaml'), 'tools:\n  files:\n    roots: [/srv/ok, projects/api]\n');
    const err = (() => {
      try {
        loadConfig({ env: { HERMES_HOME: h } });
      } catch (e) {
        return e as Error;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect(err!.message).toMatch(/^Invalid setting tools\.files\.roots\.1 \(from .*config\.yaml\): must be an absolute path/);
    writeFileSync(join(h, 'config.yaml'), 'tools:\n  files:\n    roots: [/srv/ok]\n');
    expect(loadConfig({ env: { HERMES_HOME: h } }).tools.files.roots).toEqual(['/srv/ok']);
  });

  it('names the bad key and where it came from', () => {
    expect(() => loadConfig({ env: { HERMES_HOME: home(), HERMES_LOOPS_MAX_TICKS: 'many' } })).toThrow(
      /loops\.max_ticks \(from HERMES_LOOPS_MAX_TICKS\)/,
    );
    const h = home();
    writeFileSync(join(h, 'config.yaml'), 'loops:\n  max_tick: 3\n');
    const err = (() => {
      try {
        loadConfig({ env: { HERMES_HOME: h } });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).key).toBe('loops.max_tick');
    expect((err as Error).message).toContain('config.yaml');
  });

  it('rejects an unknown time zone at load, naming the key', () => {
    expect(() => loadConfig({ env: { HERMES_HOME: home(), HERMES_TIMEZONE: 'Mars/Olympus' } })).toThrow(
      /Invalid setting timezone \(from HERMES_TIMEZONE\): unknown time zone/,
    );
    expect(loadConfig({ env: { HERMES_HOME: home(), HERMES_TIMEZONE: 'Europe/Warsaw' } }).timezone).toBe('Europe/Warsaw');
  });

  it('trims API_SERVER_HOST and refuses a host that is neither an address nor a name, naming the key', () => {
    expect(loadConfig({ env: { HERMES_HOME: home(), API_SERVER_HOST: '127.0.0.1 ' } }).api_server.host).toBe('127.0.0.1');
    expect(() => loadConfig({ env: { HERMES_HOME: home(), API_SERVER_HOST: '127.0.0.1 x' } })).toThrow(
      'Invalid setting api_server.host (from API_SERVER_HOST): must be an IP address or a host name (e.g. 127.0.0.1, ::1, localhost)',
    );
    expect(() => loadConfig({ env: { HERMES_HOME: home(), API_SERVER_HOST: ' ' } })).toThrow(/api_server\.host \(from API_SERVER_HOST\)/);
    expect(loadConfig({ env: { HERMES_HOME: home(), API_SERVER_HOST: '::' } }).api_server.host).toBe('::');
  });

  it('tables of names (models, tools, their rights, servers, commands, environments) answer only the names declared', () => {
    const c = loadConfig({
      env: { HERMES_HOME: home() },
      overrides: {
        'agent.models': { cheap: { model: 'm' } },
        'tools.commands': { ci: { command: 'true', description: 'd', env: { A: '1' } } },
        'tools.allow_from': { ci: ['cli'] },
        mcp_servers: { local: { command: 'srv', env: { B: '2' } }, remote: { url: 'http://127.0.0.1:1/mcp', headers: { X: 'y' } } },
        commands: { backup: { command: 'true', env: { C: '3' } } },
      },
    });
    const local = c.mcp_servers.local as { env: Record<string, string> };
    const remote = c.mcp_servers.remote as { headers: Record<string, string> };
    const tables = {
      'agent.models': c.agent.models,
      'tools.commands': c.tools.commands,
      'tools.commands.ci.env': c.tools.commands.ci!.env,
      'tools.allow_from': c.tools.allow_from,
      mcp_servers: c.mcp_servers,
      'mcp_servers.local.env': local.env,
      'mcp_servers.remote.headers': remote.headers,
      commands: c.commands,
      'commands.backup.env': c.commands.backup!.env,
    };
    const empty = loadConfig({ env: { HERMES_HOME: home() } });
    const defaults = {
      'agent.models': empty.agent.models,
      'tools.commands': empty.tools.commands,
      'tools.allow_from': empty.tools.allow_from,
      mcp_servers: empty.mcp_servers,
      commands: empty.commands,
    };
    for (const [path, table] of Object.entries({
      ...tables,
      ...Object.fromEntries(Object.entries(defaults).map(([k, v]) => [`${k} (default)`, v])),
    })) {
      expect(Object.getPrototypeOf(table), path).toBeNull();
      for (const name of Object.getOwnPropertyNames(Object.prototype))
        expect((table as Record<string, unknown>)[name], `${path}.${name}`).toBeUndefined();
    }
    expect(c.agent.models.cheap).toEqual({ model: 'm' });
    expect(c.tools.allow_from.ci).toEqual(['cli']);
    expect(() => loadConfig({ env: { HERMES_HOME: home() }, overrides: { 'agent.fallback_models': ['constructor'] } })).toThrow(
      /agent\.fallback_models .*must name models declared under agent\.models/,
    );
  });

  it('rejects a key prefix that is not a hash tag', () => {
    expect(() => loadConfig({ env: { HERMES_HOME: home(), HERMES_REDIS_PREFIX: 'hermes' } })).toThrow(/redis\.prefix .*hash tag/);
  });
});

describe('loop settings bounds', () => {
  it('rejects a zero floor and a ceiling below the floor, naming the key', () => {
    const h = home();
    expect(() => loadConfig({ env: { HERMES_HOME: h, HERMES_LOOPS_SELF_PACED_FLOOR_SECONDS: '0' } })).toThrow(
      /loops\.self_paced_floor_seconds/,
    );
    expect(() => loadConfig({ env: { HERMES_HOME: h, HERMES_LOOPS_SELF_PACED_CEILING_SECONDS: '30' } })).toThrow(
      /loops\.self_paced_ceiling_seconds .*must not be below/,
    );
  });
});

describe('environment values', () => {
  it('an empty HERMES_* value counts as unset, not as 0', () => {
    const c = loadConfig({
      env: { HERMES_HOME: '/nonexistent-hermes-home', HERMES_LOOPS_MAX_TICKS: '', HERMES_AGENT_CRON_DRAIN_TIMEOUT: '' },
    });
    expect(c.loops.max_ticks).toBe(100);
    expect(c.agent.cron_drain_timeout).toBe(30);
  });
});

describe('sections not given', () => {
  // loadConfig validates the settings and sections it is given and fills the others with their defaults
  // when first read: the result is the whole schema's parse of the same input.
  it("a configuration is the whole schema's parse of what it was given: defaults, file, environment", () => {
    const h = home();
    writeFileSync(join(h, 'config.yaml'), 'loops:\n  max_ticks: 7\nredis:\n  shards: 4\nworker:\n  shards: [0, 3]\nlog_level: warn\n');
    const env = { HERMES_HOME: h, HERMES_CRON_HISTORY_LIMIT: '9', HERMES_TIMEZONE: 'Europe/Warsaw', REDIS_URL: 'redis://r:6379' };
    const c = loadConfig({ env });
    const whole = configSchema().parse({
      loops: { max_ticks: 7 },
      redis: { shards: 4, url: 'redis://r:6379' },
      worker: { shards: [0, 3] },
      log_level: 'warn',
      timezone: 'Europe/Warsaw',
      cron: { history_limit: '9' },
    });
    expect({ ...c }).toEqual({ ...whole, home: h });
    expect(Object.keys(c)).toEqual([...Object.keys(whole), 'home']);
    // Nothing given: the defaults, with an unset time zone left out as the schema leaves it out.
    const bare = loadConfig({ env: { HERMES_HOME: home() } });
    expect('timezone' in bare).toBe(false);
    expect({ ...bare, home: undefined }).toEqual({ ...configSchema().parse({}), home: undefined });
    expect({ ...configDefaults() }).toEqual(configSchema().parse({}));
  });

  it('a section not given can be replaced, and each configuration has its own copy of the defaults', () => {
    const a = loadConfig({ env: { HERMES_HOME: home() } });
    const b = loadConfig({ env: { HERMES_HOME: home() } });
    a.gateway.run_timeout_seconds = 5;
    expect(b.gateway.run_timeout_seconds).toBe(600);
    a.cron = { ...a.cron, history_limit: 3 };
    expect(a.cron.history_limit).toBe(3);
    expect(b.cron.history_limit).toBe(50);
  });

  it('the rule across sections holds: a worker shard at or above redis.shards is refused, naming the key and its source', () => {
    expect(() => loadConfig({ env: { HERMES_HOME: home(), HERMES_WORKER_SHARDS: '1' } })).toThrow(
      'Invalid setting worker.shards (from HERMES_WORKER_SHARDS): every shard must be below redis.shards (shards are numbered from 0)',
    );
    expect(loadConfig({ env: { HERMES_HOME: home(), HERMES_WORKER_SHARDS: '1', HERMES_REDIS_SHARDS: '2' } }).worker.shards).toEqual([1]);
  });

  it('an environment variable that names no setting is ignored; one that names a section key is read', () => {
    const c = loadConfig({
      env: {
        HERMES_HOME: home(),
        HERMES_DEBUG: '1',
        HERMES_MCP_SERVERS: 'x',
        HERMES_HOOKS_X: 'y',
        HERMES_MCP_COMMAND_TURNS: 'yes',
        HERMES_API_SERVER_PORT: '9000',
      },
    });
    expect(c.mcp.command_turns).toBe(true);
    expect(c.mcp_servers).toEqual({});
    expect(c.hooks).toEqual({});
    expect(c.api_server.port).toBe(9000);
  });
});
