import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../schema/config.ts';

function configErrorOf(env: Record<string, string | undefined>): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      PORT: 8443,
      HOST: '0.0.0.0',
      DATA_DIR: './data',
      TRUST_PROXY: false,
      ADMIN_EMAILS: [],
      OUTBOUND_ALLOW_HOSTS: [],
      SESSION_TTL_DAYS: 30,
      RATE_LIMIT_CHAT: 60,
      RATE_LIMIT_KB_QUERY: 60,
      RATE_LIMIT_UPLOAD: 10,
      RATE_LIMIT_DEFAULT: 100,
      RATE_LIMIT_WINDOW_SECONDS: 60,
      RATE_LIMIT_KEY_PREFIX: 'rl:',
      JSON_BODY_LIMIT_BYTES: 1024 * 1024,
      QUERY_CACHE_LIMIT_BYTES: 256 * 1024,
      LOG_LEVEL: 'info',
    });
    for (const key of ['DATABASE_URL', 'REDIS_URL', 'ENCRYPTION_KEY', 'CRON_SECRET', 'OIDC_ISSUER', 'SENTRY_DSN', 'TLS_CERT'] as const) {
      expect(config[key], key).toBeUndefined();
    }
  });

  it('reads given values, coercing numbers and booleans', () => {
    const encryptionKey = randomBytes(32).toString('base64');
    const config = loadConfig({
      PORT: '3000',
      HOST: '127.0.0.1',
      DATA_DIR: '/var/lib/svc',
      DATABASE_URL: 'postgresql://u:p@db:5432/app',
      REDIS_URL: 'rediss://cache:6380',
      TRUST_PROXY: '1',
      ENCRYPTION_KEY: encryptionKey,
      CRON_SECRET: '0123456789abcdef',
      RATE_LIMIT_CHAT: '5',
      LOG_LEVEL: 'debug',
    });
    expect(config).toMatchObject({
      PORT: 3000,
      HOST: '127.0.0.1',
      DATA_DIR: '/var/lib/svc',
      DATABASE_URL: 'postgresql://u:p@db:5432/app',
      REDIS_URL: 'rediss://cache:6380',
      TRUST_PROXY: true,
      ENCRYPTION_KEY: encryptionKey,
      CRON_SECRET: '0123456789abcdef',
      RATE_LIMIT_CHAT: 5,
      LOG_LEVEL: 'debug',
    });
    expect(loadConfig({ TRUST_PROXY: 'true' }).TRUST_PROXY).toBe(true);
    expect(loadConfig({ TRUST_PROXY: 'false' }).TRUST_PROXY).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '0' }).TRUST_PROXY).toBe(false);
    expect(loadConfig({ DATABASE_URL: 'postgres://localhost/x' }).DATABASE_URL).toBe('postgres://localhost/x');
    expect(loadConfig({ REDIS_URL: 'redis://localhost:6379' }).REDIS_URL).toBe('redis://localhost:6379');
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['PORT', '80.5'],
    ['DATABASE_URL', 'mysql://x'],
    ['DATABASE_URL', 'not a url'],
    ['REDIS_URL', 'http://x'],
    ['ENCRYPTION_KEY', 'short'],
    ['ENCRYPTION_KEY', randomBytes(31).toString('base64')],
    ['CRON_SECRET', 'short'],
    ['CRON_SECRET', '0123456789abcde'],
    ['TRUST_PROXY', 'yes'],
    ['TRUST_PROXY', 'TRUE'],
    ['LOG_LEVEL', 'loud'],
    ['RATE_LIMIT_CHAT', '0'],
    ['RATE_LIMIT_UPLOAD', 'ten'],
    ['SESSION_TTL_DAYS', '1.5'],
    ['OIDC_ISSUER', 'not-a-url'],
  ])('%s=%s throws a ConfigError naming the variable', (name, value) => {
    const error = configErrorOf({ [name]: value });
    expect(error.name).toBe('ConfigError');
    expect(error.message).toMatch(/^invalid configuration:\n/);
    expect(error.message).toMatch(new RegExp(`^  ${name}: \\S`, 'm'));
    // only the bad variable is named
    for (const line of error.message.split('\n').slice(1)) expect(line.startsWith(`  ${name}: `), line).toBe(true);
  });

  it('requires OIDC_AUDIENCE with OIDC_ISSUER', () => {
    expect(configErrorOf({ OIDC_ISSUER: 'https://issuer.example.com' }).message).toContain('OIDC_AUDIENCE: is required when OIDC_ISSUER is set');
    expect(() => loadConfig({ OIDC_ISSUER: 'https://issuer.example.com', OIDC_AUDIENCE: 'client-1' })).not.toThrow();
  });

  it('names the reason for the URL checks', () => {
    expect(configErrorOf({ DATABASE_URL: 'mysql://x' }).message).toContain('DATABASE_URL: must be a postgres:// URL');
    expect(configErrorOf({ REDIS_URL: 'http://x' }).message).toContain('REDIS_URL: must be a redis:// URL');
    expect(configErrorOf({ ENCRYPTION_KEY: 'short' }).message).toContain('ENCRYPTION_KEY: must be 32 bytes encoded as base64');
    expect(configErrorOf({ CRON_SECRET: 'short' }).message).toContain('CRON_SECRET: must be at least 16 characters');
  });

  it('lists every bad variable at once', () => {
    const message = configErrorOf({ PORT: 'abc', LOG_LEVEL: 'loud', REDIS_URL: 'http://x' }).message;
    expect(message).toMatch(/^ {2}PORT: /m);
    expect(message).toMatch(/^ {2}LOG_LEVEL: /m);
    expect(message).toMatch(/^ {2}REDIS_URL: /m);
    expect(message.split('\n')).toHaveLength(4);
  });

  it('parses lists: ADMIN_EMAILS trimmed and lowercased, OUTBOUND_ALLOW_HOSTS split', () => {
    const config = loadConfig({
      ADMIN_EMAILS: ' Alice@Example.COM ,bob@example.org,, ,CAROL@x.io ',
      OUTBOUND_ALLOW_HOSTS: 'api.openai.com, internal.local ,10.0.0.5,',
    });
    expect(config.ADMIN_EMAILS).toEqual(['alice@example.com', 'bob@example.org', 'carol@x.io']);
    expect(config.OUTBOUND_ALLOW_HOSTS).toEqual(['api.openai.com', 'internal.local', '10.0.0.5']);
    expect(loadConfig({ OUTBOUND_ALLOW_HOSTS: 'One.Host' }).OUTBOUND_ALLOW_HOSTS).toEqual(['One.Host']);
  });

  it('treats empty strings as unset', () => {
    const config = loadConfig({
      PORT: '',
      HOST: '',
      DATABASE_URL: '',
      REDIS_URL: '',
      ENCRYPTION_KEY: '',
      CRON_SECRET: '',
      TRUST_PROXY: '',
      LOG_LEVEL: '',
      RATE_LIMIT_CHAT: '',
      ADMIN_EMAILS: '',
    });
    expect(config.PORT).toBe(8443);
    expect(config.HOST).toBe('0.0.0.0');
    expect(config.DATABASE_URL).toBeUndefined();
    expect(config.REDIS_URL).toBeUndefined();
    expect(config.ENCRYPTION_KEY).toBeUndefined();
    expect(config.CRON_SECRET).toBeUndefined();
    expect(config.TRUST_PROXY).toBe(false);
    expect(config.LOG_LEVEL).toBe('info');
    expect(config.RATE_LIMIT_CHAT).toBe(60);
    expect(config.ADMIN_EMAILS).toEqual([]);
  });

  it('ignores unrelated environment variables', () => {
    const config = loadConfig({ PATH: '/usr/bin', HOME: '/root', PORT: '9000' });
    expect(config.PORT).toBe(9000);
    expect(config).not.toHaveProperty('PATH');
    expect(config).not.toHaveProperty('HOME');
  });
});
