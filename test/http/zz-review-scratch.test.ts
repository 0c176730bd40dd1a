import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, it } from 'vitest';
import { startSmtpServer, type TestSmtpServer } from '../helpers/smtp-server.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { log, raw } from '/tmp/review/common.ts';

let app: TestApp; let smtp: TestSmtpServer;
let model: Server; let modelUrl = ''; const script: any[] = []; const modelSeen: any[] = [];
let tokenSrv: Server; let tokenUrl = ''; let tokenReply: { status: number; body: string } = { status: 200, body: '{"access_token":"xoxb-SECRET-ACCESS","refresh_token":"xoxr-SECRET-REFRESH","expires_in":3600}' };
let ep: Server; let epUrl = ''; let epHits = 0;
let a: any; let b: any;
const R = (m: string, p: string, o: any = {}) => raw(app.url, m, p, o);

function listen(s: Server) { return new Promise<string>((r) => s.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${(s.address() as AddressInfo).port}`))); }
beforeAll(async () => {
  model = createServer((req, res) => { let body = ''; req.on('data', (c) => (body += c)); req.on('end', () => {
    const request = JSON.parse(body); modelSeen.push({ bytes: body.length, tools: request.tools?.length, msgs: request.messages.length });
    const next = request.tools?.length ? script.shift() : undefined;
    const message = next?.toolCalls ? { role: 'assistant', content: null, tool_calls: next.toolCalls.map((c: any, i: number) => ({ id: `call_${i}`, type: 'function', function: { name: c.name, arguments: typeof c.rawArgs === 'string' ? c.rawArgs : JSON.stringify(c.arguments) } })) } : { role: 'assistant', content: next?.text ?? 'ok' };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: 'x', model: 'm', choices: [{ index: 0, message, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
  }); });
  modelUrl = await listen(model);
  tokenSrv = createServer((req, res) => { req.resume(); req.on('end', () => { res.writeHead(tokenReply.status, { 'content-type': 'application/json' }); res.end(tokenReply.body); }); });
  tokenUrl = await listen(tokenSrv);
  ep = createServer((req, res) => { epHits++; req.resume(); req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('{"ok":true}'); }); });
  epUrl = await listen(ep);
  smtp = await startSmtpServer();
  app = await startTestApp({
    SMTP_URL: smtp.url, MAIL_FROM: 'B <b@service.test>',
    RATE_LIMIT_DEFAULT: '100000', RATE_LIMIT_CHAT: '100000',
    TOOLHUB_PLATFORM_CLIENTS: 'slack=cid-123:PLATFORM-CLIENT-SECRET',
    TOOLHUB_PROVIDER_URLS: `slack.token=${tokenUrl}/token,slack.api=${tokenUrl}/api`,
    OUTBOUND_ALLOW_HOSTS: [new URL(modelUrl).host, new URL(tokenUrl).host, new URL(epUrl).host].join(','),
  });
  a = await app.signUp('pa'); b = await app.signUp('pb');
}, 120_000);
afterAll(async () => { await app?.stop(); await smtp?.close(); model?.close(); tokenSrv?.close(); ep?.close(); });

async function iface(token: string, kbBody: any = { name: 'K' }, tools: any[] = [{ name: 'book_slot', enabled: true }]) {
  const kb = (await R('POST', '/api/v1/knowledge-base/configs', { token, body: kbBody })).body.data.config.id;
  await R('PATCH', `/api/v1/knowledge-base/configs/${kb}/tools`, { token, body: { tools } });
  const c = (await R('POST', '/api/v1/chat-interfaces', { token, body: { name: 'C', configId: kb, public: true } })).body.data.chatInterface;
  return { ...c, kb };
}
const allDay = [{ start: '00:00', end: '24:00' }];
const week = (r: any) => Object.fromEntries(['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, r]));
const att = { name: 'Ada', email: 'ada@example.com' };

it('bookings edge inputs', async () => {
  const i = await iface(a.token);
  log('avail', (await R('PUT', `/api/v1/chat-interfaces/${i.id}/availability`, { token: a.token, body: { timeZone: 'UTC', weekly: week(allDay), minNoticeMinutes: 0, maxDaysAhead: 365 } })).status);
  const cases: Array<[string, string, any?]> = [
    ['GET', `/api/v1/bookings/available-slots?chatInterfaceId=${i.id}&from=0000-01-01T00:00:00Z&to=0000-01-02T00:00:00Z`],
    ['GET', `/api/v1/bookings/available-slots?chatInterfaceId=${i.id}&from=0001-01-03T00:00:00Z&to=0001-01-04T00:00:00Z`],
    ['GET', `/api/v1/bookings/available-slots?chatInterfaceId=${i.id}&from=9999-12-25T00:00:00Z`],
    ['GET', `/api/v1/bookings/available-slots?chatInterfaceId=${i.id}&from=%2B275760-09-13T00:00:00Z`],
    ['GET', `/api/v1/bookings?from=0000-01-01T00:00:00Z`],
    ['GET', `/api/v1/bookings?to=9999-12-31T23:59:59Z&from=9999-12-31T00:00:00Z`],
    ['POST', '/api/v1/bookings', { chatInterfaceId: i.id, start: '9999-12-31T00:00:00Z', attendee: att }],
    ['POST', '/api/v1/bookings', { chatInterfaceId: i.id, start: '0000-01-01T00:00:00Z', attendee: att }],
    ['POST', '/api/v1/bookings/manual', { chatInterfaceId: i.id, start: '9999-12-31T00:00:00Z', end: '9999-12-31T01:00:00Z', attendee: att }],
    ['POST', '/api/v1/bookings/manual', { chatInterfaceId: i.id, start: '0000-01-01T00:00:00Z', end: '0000-01-01T01:00:00Z', attendee: att }],
    ['POST', '/api/v1/bookings/manual', { chatInterfaceId: i.id, start: '0001-01-05T00:00:00Z', end: '0001-01-05T01:00:00Z', attendee: att }],
    ['POST', '/api/v1/bookings', { chatInterfaceId: i.id, start: '2030-01-01T00:00:00Z', attendee: { ...att, name: 'a\u0000b' } }],
    ['POST', '/api/v1/bookings', { chatInterfaceId: i.id, start: '2030-01-01T00:00:00Z', attendee: att, notes: 'x'.repeat(3000) }],
    ['POST', '/api/v1/bookings', { chatInterfaceId: i.id, start: 12345, attendee: att }],
    ['POST', '/api/v1/bookings', { chatInterfaceId: [i.id], start: '2030-01-01T00:00:00Z', attendee: att }],
    ['POST', '/api/v1/bookings', { chatInterfaceId: i.id, start: '2030-02-30T00:00:00Z', attendee: att }],
    ['POST', '/api/v1/bookings/attendee-cancel', { token: 'bkc_' + 'A'.repeat(100) }],
    ['POST', '/api/v1/bookings/attendee-cancel', { token: 12345678901 }],
    ['PUT', `/api/v1/chat-interfaces/${i.id}/availability`, { timeZone: 'UTC', weekly: week(allDay), overrides: Array.from({ length: 10000 }, (_, k) => ({ date: '2030-01-01', ranges: [] })) }],
    ['PUT', `/api/v1/chat-interfaces/${i.id}/availability`, { timeZone: 'UTC', weekly: week(allDay), overrides: [{ date: '0000-01-01', ranges: [] }] }],
    ['PUT', `/api/v1/chat-interfaces/${i.id}/availability`, { timeZone: 'Etc/GMT-14', weekly: { mon: allDay } }],
  ];
  for (const [m, p, body] of cases) {
    const r = await R(m, p, { token: a.token, body });
    log('EDGE', m, p.replace(i.id, 'ID').slice(0, 110), JSON.stringify(body ?? '').slice(0, 100), '=>', r.status, r.status >= 500 ? r.text.slice(0, 200) : (r.body?.error?.details ?? '').slice?.(0, 120) ?? '');
  }
  const errs = app.logs.filter((l) => l.includes('"level":"error"')).map((l) => JSON.parse(l)).map((l) => `${l.path} ${l.errorMessage}`);
  log('ERRLOGS', errs.slice(-10));
}, 120_000);

it('allowOverlap semantics and double booking', async () => {
  const i = await iface(a.token);
  await R('PUT', `/api/v1/chat-interfaces/${i.id}/availability`, { token: a.token, body: { timeZone: 'UTC', weekly: week(allDay), minNoticeMinutes: 0, maxDaysAhead: 365 } });
  const m1 = await R('POST', '/api/v1/bookings/manual', { token: a.token, body: { chatInterfaceId: i.id, start: '2027-06-01T10:00:00Z', end: '2027-06-01T11:00:00Z', attendee: att, allowOverlap: true } });
  log('manual overlap', m1.status, m1.body?.data?.booking?.exclusive);
  const n1 = await R('POST', '/api/v1/bookings', { token: a.token, body: { chatInterfaceId: i.id, start: '2027-06-01T10:00:00Z', attendee: att } });
  log('normal over non-exclusive booking (README: does not block) =>', n1.status);
  const m2 = await R('POST', '/api/v1/bookings/manual', { token: a.token, body: { chatInterfaceId: i.id, start: '2027-06-01T10:00:00Z', end: '2027-06-01T11:00:00Z', attendee: att } });
  log('manual exclusive over non-exclusive =>', m2.status);
  // isolation
  const bb = await R('POST', '/api/v1/bookings/manual', { token: b.token, body: { chatInterfaceId: i.id, start: '2027-06-02T10:00:00Z', end: '2027-06-02T11:00:00Z', attendee: att } });
  log('B manual on A iface', bb.status);
  log('B cancel A booking', (await R('POST', `/api/v1/bookings/${m1.body.data.booking.id}/cancel`, { token: b.token, body: {} })).status);
  log('B list', (await R('GET', `/api/v1/bookings?chatInterfaceId=${i.id}`, { token: b.token })).body?.data?.total);
  log('B slots A', (await R('GET', `/api/v1/bookings/available-slots?chatInterfaceId=${i.id}`, { token: b.token })).status);
  // concurrency: 10 normal + 10 manual on same slot
  const reqs = [];
  for (let k = 0; k < 10; k++) reqs.push(R('POST', '/api/v1/bookings', { token: a.token, body: { chatInterfaceId: i.id, start: '2027-06-03T10:00:00Z', attendee: att } }));
  for (let k = 0; k < 10; k++) reqs.push(R('POST', '/api/v1/bookings/manual', { token: a.token, body: { chatInterfaceId: i.id, start: '2027-06-03T10:10:00Z', end: '2027-06-03T10:20:00Z', attendee: att } }));
  const st = (await Promise.all(reqs)).map((r) => r.status);
  log('race statuses', st.join(','));
}, 120_000);

it('cancel link follows Host header', async () => {
  const i = await iface(a.token);
  await R('PUT', `/api/v1/chat-interfaces/${i.id}/availability`, { token: a.token, body: { timeZone: 'UTC', weekly: week(allDay), minNoticeMinutes: 0, maxDaysAhead: 365 } });
  const s = await R('POST', `/api/v1/chat/${i.slug}/visitor-sessions`, { body: {} });
  const r = await R('POST', `/api/v1/chat/${i.slug}/bookings`, { token: s.body.data.token, headers: { host: 'evil.example' }, body: { start: '2027-07-01T10:00:00Z', attendee: { name: 'V', email: 'victim@example.com' } } });
  log('visitor book with Host evil', r.status, r.text.slice(0, 150));
  if (r.status === 201) {
    const mails = await smtp.waitFor((m) => m.envelope.to.includes('victim@example.com'));
    const text = String(mails[0]!.parsed.text ?? '') + String(mails[0]!.parsed.html ?? '');
    log('mail link', (text.match(/https?:\/\/[^\s"<]+cancel[^\s"<]*/) ?? ['none'])[0].slice(0, 80));
  }
}, 60_000);

it('oauth flow', async () => {
  const connect = async (tok: string, body: any = { toolkit: 'slack' }) => R('POST', '/api/v1/toolhub/connect', { token: tok, body });
  const stateOf = (u: string) => new URL(u).searchParams.get('state')!;
  const c1 = await connect(a.token);
  log('connect', c1.status, c1.body?.data?.authorizationUrl?.slice(0, 200));
  const st1 = stateOf(c1.body.data.authorizationUrl);
  const cb = (q: string) => R('GET', `/api/v1/toolhub/oauth/callback?${q}`);
  const r1 = await cb(`state=${st1}&code=abc`);
  log('callback ok', r1.status, r1.body?.data?.account?.status, JSON.stringify(r1.body).includes('SECRET'));
  log('replay', (await cb(`state=${st1}&code=abc`)).status);
  const c2 = await connect(a.token); const st2 = stateOf(c2.body.data.authorizationUrl);
  log('error=access_denied', (await cb(`state=${st2}&error=access_denied`)).body?.data?.account?.status);
  for (const [label, reply] of [['nonjson', { status: 200, body: 'hello' }], ['500', { status: 500, body: '{"error":"server_error","error_description":"INTERNAL TOKEN DETAIL"}' }], ['noaccess', { status: 200, body: '{"ok":true}' }], ['hugeexp', { status: 200, body: '{"access_token":"t","expires_in":1e300}' }], ['negexp', { status: 200, body: '{"access_token":"t","expires_in":1e15}' }], ['scopesnul', { status: 200, body: '{"access_token":"t","scope":"a\\u0000b"}' }], ['desc-nul', { status: 400, body: '{"error":"bad","error_description":"x\\u0000y"}' }]] as const) {
    tokenReply = reply as any;
    const c = await connect(a.token); const st = stateOf(c.body.data.authorizationUrl);
    const r = await cb(`state=${st}&code=abc`);
    log('callback token', label, r.status, r.body?.data?.account?.status, r.body?.data?.account?.statusReason ?? r.text.slice(0, 200));
  }
  tokenReply = { status: 200, body: '{"access_token":"xoxb-SECRET-ACCESS"}' };
  const c3 = await connect(a.token); const st3 = stateOf(c3.body.data.authorizationUrl);
  log('bad inputs', (await cb(`state=${'x'.repeat(201)}`)).status, (await cb(``)).status, (await cb(`state=${st3}&state=${st3}`)).status, (await cb(`state=%00`)).status, (await cb(`state=${st3}&error=%00`)).status);
  // another owner's auth config
  const ac = await R('POST', '/api/v1/toolhub/auth-configs', { token: a.token, body: { toolkit: 'slack', clientId: 'own-cid', clientSecret: 'OWNER-CLIENT-SECRET' } });
  log('authconfig create', ac.status, JSON.stringify(ac.body).includes('OWNER-CLIENT-SECRET'));
  log('B connect with A authConfig', (await connect(b.token, { toolkit: 'slack', authConfigId: ac.body.data.authConfig.id })).status);
  log('B patch A authConfig', (await R('PATCH', `/api/v1/toolhub/auth-configs/${ac.body.data.authConfig.id}`, { token: b.token, body: { name: 'x' } })).status);
  log('B delete A authConfig', (await R('DELETE', `/api/v1/toolhub/auth-configs/${ac.body.data.authConfig.id}`, { token: b.token })).status);
  const hub = await R('POST', '/api/v1/toolhub/auth-configs', { token: a.token, body: { toolkit: 'hubspot', clientId: 'hub-cid', clientSecret: 'HUB' } });
  const cross = await connect(a.token, { toolkit: 'slack', authConfigId: hub.body.data.authConfig.id });
  log('slack connect with own hubspot authConfig', cross.status, cross.body?.data?.authorizationUrl?.includes('hub-cid'));
  log('platform:hubspot for slack', (await connect(a.token, { toolkit: 'slack', authConfigId: 'platform:hubspot' })).status);
  const acc = r1.body.data.account.id;
  log('B account', (await R('GET', `/api/v1/toolhub/accounts/${acc}`, { token: b.token })).status, (await R('POST', `/api/v1/toolhub/accounts/${acc}/activate`, { token: b.token })).status, (await R('POST', `/api/v1/toolhub/accounts/${acc}/disable`, { token: b.token })).status);
  for (const body of [{ toolkit: 'slack', settings: { x: 'a' }, label: 'a\u0000' }, { toolkit: 'slack', scopes: Array(51).fill('a') }, { toolkit: 'nope\u0000' }, { toolkit: 'slack', settings: [1, 2] }, { toolkit: 'slack', settings: { big: 'x'.repeat(900_000) } }]) {
    const r = await connect(a.token, body);
    log('connect bad', JSON.stringify(body).slice(0, 60), r.status, r.status >= 500 ? r.text.slice(0, 100) : '');
  }
  const leaks = app.logs.filter((l) => /SECRET|xoxb|xoxr/.test(l));
  log('log lines with secrets', leaks.length, leaks.slice(0, 3).map((l) => l.slice(0, 300)));
  const dbg = await R('GET', '/api/v1/toolhub/debug-accounts', { token: a.token });
  log('debug leaks', /SECRET|xoxb/.test(dbg.text));
}, 120_000);

it('http tool SSRF + settings', async () => {
  const port = new URL(epUrl).port;
  for (const url of ['http://169.254.169.254/latest/meta-data/', 'http://127.0.0.1:1/', `http://localhost:${Number(port) + 1}/`, 'http://[::ffff:7f00:1]:80/', 'http://0x7f000001/', 'http://2130706433/', 'http://metadata.google.internal/', 'file:///etc/passwd', `http://127.0.0.1:${port}@evil/`]) {
    const r = await R('POST', '/api/v1/toolhub/connect', { token: a.token, body: { toolkit: 'http', settings: { url, inputSchema: { type: 'object' }, description: 'x' } } });
    log('http connect', url, r.status, (r.body?.error?.details ?? '').slice(0, 120));
  }
  const hits0 = epHits;
  const bad = await R('POST', '/api/v1/toolhub/connect', { token: a.token, body: { toolkit: 'http', settings: { url: `${epUrl}/x`, inputSchema: 'notobject', description: 5, extra: { deep: 1 }, method: 'get' } } });
  log('http connect with schema-invalid settings', bad.status, JSON.stringify(bad.body?.data?.account?.settings));
}, 60_000);

it('tool loop bounds', async () => {
  const i = await iface(a.token, { name: 'M', llm: { provider: 'openai', baseUrl: modelUrl, model: 'm' } }, [{ name: 'book_slot', enabled: true, config: { daysAhead: 62 } }, { name: 'lead_capture', enabled: true }]);
  const twelve = Array.from({ length: 12 }, (_, k) => ({ start: '00:00', end: k % 2 ? '24:00' : '23:55' }));
  const av = await R('PUT', `/api/v1/chat-interfaces/${i.id}/availability`, { token: a.token, body: { timeZone: 'UTC', weekly: week(twelve), slotMinutes: 5, minNoticeMinutes: 0, maxDaysAhead: 365 } });
  log('worst avail', av.status);
  const s = await R('POST', `/api/v1/chat/${i.slug}/visitor-sessions`, { body: {} });
  const vt = s.body.data.token;
  // 1 call baseline
  script.push({ toolCalls: [{ name: 'book_slot', arguments: {} }] });
  let t = Date.now();
  let r = await R('POST', `/api/v1/chat/${i.slug}/visitor-messages`, { token: vt, body: { message: 'book' } });
  log('1 book_slot call', r.status, Date.now() - t, 'ms');
  const N = Number(process.env.REVIEW_N ?? 100);
  for (let k = 0; k < 4; k++) script.push({ toolCalls: Array.from({ length: N }, () => ({ name: 'book_slot', arguments: {} })) });
  // measure event-loop stall seen by other clients
  let maxLag = 0; let probing = true;
  const prober = (async () => { while (probing) { const t0 = Date.now(); await R('GET', '/api/v1/health').catch((e) => log('probe err', String(e))); maxLag = Math.max(maxLag, Date.now() - t0); await new Promise((res) => setTimeout(res, 50)); } })();
  t = Date.now();
  r = await R('POST', `/api/v1/chat/${i.slug}/visitor-messages`, { token: vt, body: { message: 'book' } }).catch((e) => { log('main err', String(e), Date.now() - t); return { status: 0, text: '', body: null } as any; });
  probing = false; await prober;
  log(`4 rounds x ${N} book_slot calls`, r.status, Date.now() - t, 'ms; response bytes', r.text.length, 'toolCalls', r.body?.toolCalls?.length, 'max health latency', maxLag, 'model requests bytes', modelSeen.slice(-5).map((m) => m.bytes));
  // odd names / args
  script.push({ toolCalls: [{ name: 'x'.repeat(100_000), arguments: {} }, { name: 'book_slot', rawArgs: '[1,2]' }, { name: 'book_slot', rawArgs: '"str"' }, { name: 'book_slot', rawArgs: 'not json' }, { name: 'lead_capture', rawArgs: JSON.stringify({ reason: 'y'.repeat(1_000_000) }) }, { name: 'a\u0000b', arguments: { 'k\u0000': 'v\u0000' } }] });
  t = Date.now();
  r = await R('POST', `/api/v1/chat/${i.slug}/visitor-messages`, { token: vt, body: { message: 'odd' } }).catch((e) => { log('odd err', String(e)); return { status: 0, text: '', body: null } as any; });
  log('errlogs', app.logs.filter((l) => l.includes('"level":"error"') || l.includes('"level":"warn"')).slice(-5).map((l) => l.slice(0, 400)));
  log('odd calls', r.status, Date.now() - t, 'ms bytes', r.text.length, r.status >= 500 ? r.text.slice(0, 200) : r.body?.toolCalls?.map((c: any) => `${c.name.slice(0, 10)}:${(c.error ?? 'ok').slice(0, 40)}:${JSON.stringify(c.arguments).length}`));
}, 600_000);
