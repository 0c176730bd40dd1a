// Starts the service the way `npm start` does, with the Node binary in $NODE22 (or this one), on a fresh
// data directory, and makes a few real requests: health, sign-up, create an interface, GraphQL, plain HTTP refused.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const nodeBin = process.env.NODE22 || process.execPath;
const dataDir = mkdtempSync(join(tmpdir(), 'cis-smoke-'));
const port = 20000 + Math.floor(Math.random() * 20000);
const child = spawn(nodeBin, ['server/start.mjs'], {
  env: { ...process.env, DATABASE_URL: '', REDIS_URL: '', PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir },
  stdio: ['ignore', 'pipe', 'inherit'],
});
let output = '';
child.stdout.on('data', (c) => (output += c));

function call(method, path, { body, token } = {}) {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        rejectUnauthorized: false,
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.setTimeout(15_000, () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.end(body ? JSON.stringify(body) : undefined);
  });
}

function check(label, ok) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${label}`);
  if (!ok) process.exitCode = 1;
}

const deadline = Date.now() + 60_000;
try {
  while (!output.includes('"listening"')) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`service did not start:\n${output}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const version = await new Promise((resolve) => {
    const v = spawn(nodeBin, ['--version']);
    let s = '';
    v.stdout.on('data', (c) => (s += c));
    v.on('close', () => resolve(s.trim()));
  });
  console.log(`service started on node ${version}`);
  const health = await call('GET', '/api/v1/health/hosting');
  check('GET /api/v1/health/hosting is 200 on pglite', health.status === 200 && health.body.data.database.kind === 'pglite');
  const signUp = await call('POST', '/api/v1/auth/sign-up', { body: { email: 'smoke@example.com', password: 'smoke test password' } });
  check('POST /api/v1/auth/sign-up is 201', signUp.status === 201);
  const token = signUp.body.data.token;
  const created = await call('POST', '/api/v1/chat-interfaces', { token, body: { name: 'Smoke' } });
  check('POST /api/v1/chat-interfaces is 201', created.status === 201);
  const key = await call('POST', '/api/v1/api-keys', { token, body: { name: 'k', chatInterfaceId: created.body.data.chatInterface.id } });
  check('POST /api/v1/api-keys returns an svc_ key', key.status === 201 && key.body.data.key.startsWith('svc_'));
  const gql = await call('POST', '/graphql', { token, body: { query: '{ me { email } chatInterfaces { slug } }' } });
  check('GraphQL me + chatInterfaces', gql.status === 200 && gql.body.data.me.email === 'smoke@example.com' && gql.body.data.chatInterfaces.length === 1);
  const plain = await new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port, path: '/api/v1/health/hosting' }, (res) => {
      res.resume();
      resolve(res.statusCode);
    })
      .on('error', reject)
      .end();
  });
  check('plain HTTP is refused with 403', plain === 403);
} catch (error) {
  console.error(String(error));
  process.exitCode = 1;
} finally {
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  check('service exits on SIGTERM', child.exitCode === 0);
  rmSync(dataDir, { recursive: true, force: true });
}
