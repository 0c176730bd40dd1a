import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { inject } from 'vitest';
import { loadConfig } from '../../schema/config.ts';
import { startApp, type RunningApp } from '../../server/app.ts';
import { openPGlite, openPostgres, type Database } from '../../db/database.ts';
import { createLogger } from '../../adapters/outbound/logger.ts';
import { assertMatchesContract, contractFor } from './openapi-contract.ts';

export interface TestResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** Parsed JSON body (undefined when the body is not JSON). */
  body: any;
}

export interface RequestOptions {
  token?: string;
  body?: unknown;
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
}

export interface UploadOptions {
  token?: string;
  fileName: string;
  contentType?: string;
  bytes: Buffer | Uint8Array;
  fields?: Record<string, string>;
}

/** A real multipart/form-data body, as a browser or curl -F sends it. */
export function multipartBody(options: UploadOptions): { body: Buffer; contentType: string } {
  const boundary = `----cis${Math.random().toString(16).slice(2)}`;
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(options.fields ?? {})) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  }
  parts.push(
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${options.fileName}"\r\nContent-Type: ${options.contentType ?? 'application/octet-stream'}\r\n\r\n`,
    ),
  );
  parts.push(Buffer.from(options.bytes), Buffer.from(`\r\n--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
}

export interface TestApp extends RunningApp {
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  upload(path: string, options: UploadOptions): Promise<TestResponse>;
  /** Signs up a fresh owner and returns its session token and id. */
  signUp(prefix?: string): Promise<{ token: string; ownerId: string; email: string }>;
  /**
   * Changes an owner's plan or role in SQL, as an operator would. Cached sessions of this instance are dropped at
   * once: on PostgreSQL the change notification arrives a moment later, and the next request must not race it.
   */
  setOwner(ownerId: string, changes: { plan?: 'free' | 'premium' | 'enterprise'; role?: 'owner' | 'admin' }): Promise<void>;
  logs: string[];
  /** A second instance of the service on this app's database (its own connections on PostgreSQL; on PGlite, the
   *  one in-process database shared), as another replica behind a load balancer. Stop it before this app. */
  startPeer(env?: Record<string, string>): Promise<TestApp>;
  stop(): Promise<void>;
}

/** A fresh database for one test file: a PGlite clone of the migrated template, or a new PostgreSQL database. */
export async function openTestDatabase(): Promise<{ database: Database; openPeer(): Database; drop(): Promise<void> }> {
  const databaseUrl = process.env.DATABASE_URL;
  const pgTemplate = inject('postgresTemplate');
  if (databaseUrl && pgTemplate) {
    const name = `cis_test_${randomBytes(5).toString('hex')}`;
    const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${name} template ${pgTemplate}`);
    const url = new URL(databaseUrl);
    url.pathname = `/${name}`;
    return {
      database: openPostgres(url.toString(), 5),
      openPeer: () => openPostgres(url.toString(), 5),
      drop: async () => {
        await admin.unsafe(`drop database if exists ${name} with (force)`);
        await admin.end();
      },
    };
  }
  const template = readFileSync(inject('pgliteTemplate'));
  const database = await openPGlite({ loadDataDir: new Blob([template]) });
  // PGlite is one in-process connection: a peer shares it, and leaves closing it to the first app.
  return { database, openPeer: () => ({ ...database, close: async () => {} }), drop: async () => {} };
}

// Idle sockets are dropped after 3 s, before the server's 5 s keep-alive timeout can close one under a new request.
export const insecureAgent = new Agent({ keepAlive: true, rejectUnauthorized: false, maxSockets: 16, timeout: 3_000 });

/** Every response to an operation of the OpenAPI document must match it: a mismatch fails the test that made the call. */
export async function httpsCall(baseUrl: string, method: string, path: string, options: RequestOptions = {}): Promise<TestResponse> {
  const response = await rawHttpsCall(baseUrl, method, path, options);
  assertMatchesContract(await openApiContract(baseUrl), method, path, response);
  return response;
}

/** The document the app at baseUrl serves (fetched once per app), to check its responses against. */
export const openApiContract = (baseUrl: string) => contractFor(baseUrl, () => rawHttpsCall(baseUrl, 'GET', '/api/v1/openapi.json'));

function rawHttpsCall(baseUrl: string, method: string, path: string, options: RequestOptions = {}): Promise<TestResponse> {
  const headers: Record<string, string> = { ...options.headers };
  let payload: string | Buffer | undefined = options.rawBody;
  if (options.body !== undefined) {
    payload = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  return new Promise((resolve, reject) => {
    const req = httpsRequest(new URL(path, baseUrl), { method, headers, agent: insecureAgent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

export async function startTestApp(env: Record<string, string> = {}): Promise<TestApp> {
  return startOnDatabase(env, await openTestDatabase());
}

async function startOnDatabase(env: Record<string, string>, storage: { database: Database; openPeer(): Database; drop(): Promise<void> }): Promise<TestApp> {
  const { database, drop } = storage;
  const dataDir = mkdtempSync(join(tmpdir(), 'cis-data-'));
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    LOG_LEVEL: 'debug',
    REDIS_URL: process.env.REDIS_URL,
    // Test files run in parallel against one Redis: each app counts in its own key space unless told otherwise.
    RATE_LIMIT_KEY_PREFIX: `rl:test:${randomBytes(4).toString('hex')}:`,
    ...env,
  });
  const logs: string[] = [];
  const app = await startApp(config, { database, logger: createLogger('debug', (line) => logs.push(line)) });
  // Fetched now, while the app surely answers: a test may stop or crash it before its first checked response.
  await openApiContract(app.url);
  let counter = 0;
  const request = (method: string, path: string, options?: RequestOptions) => httpsCall(app.url, method, path, options);
  return {
    ...app,
    logs,
    request,
    upload(path, options) {
      const { body, contentType } = multipartBody(options);
      return request('POST', path, { token: options.token, rawBody: body, headers: { 'content-type': contentType } });
    },
    async signUp(prefix = 'owner') {
      const email = `${prefix}-${++counter}-${randomBytes(3).toString('hex')}@example.com`;
      const res = await request('POST', '/api/v1/auth/sign-up', { body: { email, password: 'correct horse battery' } });
      if (res.status !== 201) throw new Error(`sign-up failed: ${res.status} ${res.text}`);
      return { token: res.body.data.token as string, ownerId: res.body.data.owner.id as string, email };
    },
    async setOwner(ownerId, changes) {
      await app.deps.database.db.updateTable('owners').set(changes).where('id', '=', ownerId).execute();
      app.deps.sessionCache.forgetOwner(ownerId);
    },
    startPeer: (peerEnv = {}) =>
      startOnDatabase(
        { ENCRYPTION_KEY: config.ENCRYPTION_KEY!, RATE_LIMIT_KEY_PREFIX: config.RATE_LIMIT_KEY_PREFIX, ...env, ...peerEnv },
        { database: storage.openPeer(), openPeer: storage.openPeer, drop: async () => {} },
      ),
    async stop() {
      await app.close();
      await drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
