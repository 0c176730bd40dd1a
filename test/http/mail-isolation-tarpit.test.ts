import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import { sql } from 'kysely';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.ts';
import { startSmtpServer, type TestSmtpServer } from '../helpers/smtp-server.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * Mail jobs against an SMTP server that stalls them, through the real listener: a tarpit that greets at once and then
 * trickles its EHLO reply one byte a second (below any idle timeout, so only an overall deadline ends a send). Mail
 * runs on its own workers, so a booking's stuck mails never delay another owner's document; a send is abandoned at
 * SMTP_SEND_TIMEOUT_MS and retried; a stop while sends are stuck finishes at once and counts their attempts, so a
 * tarpit cannot keep a mail job alive across restarts.
 */

interface Tarpit {
  url: string;
  /** Connections accepted so far, and the ones still open. */
  accepted(): number;
  open(): number;
  /** How long each closed connection lasted, in ms, in the order they closed. */
  lifetimes: number[];
  /** From now on, new connections are passed to this SMTP server instead of stalled. */
  forwardTo(url: string): void;
  close(): Promise<void>;
}

async function startTarpit(trickleMs = 1_000): Promise<Tarpit> {
  const sockets = new Set<Socket>();
  const lifetimes: number[] = [];
  let accepted = 0;
  let forward: { host: string; port: number } | undefined;
  const server = createServer((socket) => {
    accepted++;
    sockets.add(socket);
    const opened = Date.now();
    let trickle: ReturnType<typeof setInterval> | undefined;
    socket.on('error', () => {});
    // The client closing its side (an abandoned send) ends the connection here too.
    socket.on('end', () => socket.destroy());
    socket.on('close', () => {
      clearInterval(trickle);
      sockets.delete(socket);
      lifetimes.push(Date.now() - opened);
    });
    if (forward) {
      const upstream = connect(forward.port, forward.host);
      upstream.on('error', () => socket.destroy());
      socket.on('close', () => upstream.destroy());
      upstream.on('close', () => socket.destroy());
      socket.pipe(upstream).pipe(socket);
      return;
    }
    socket.write('220 tarpit.test ESMTP\r\n');
    socket.once('data', () => {
      // A multi-line EHLO reply that never reaches its last line, one byte at a time.
      const reply = Buffer.from('250-tarpit.test\r\n');
      let at = 0;
      trickle = setInterval(() => {
        socket.write(reply.subarray(at, at + 1));
        at = (at + 1) % reply.length;
      }, trickleMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    accepted: () => accepted,
    open: () => sockets.size,
    lifetimes,
    forwardTo(url) {
      const target = new URL(url);
      forward = { host: target.hostname, port: Number(target.port) };
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

interface MailJobRow {
  id: string;
  kind: string;
  status: string;
  attempts: number;
  max_attempts: number;
  last_error: string | null;
  locked_by: string | null;
  due_in_ms: number;
}

const mailJobs = async (app: TestApp, bookingId?: string) =>
  (
    await sql<MailJobRow>`select id, kind, status, attempts, max_attempts, last_error, locked_by,
        (extract(epoch from run_at - now()) * 1000)::float8 as due_in_ms
      from jobs where kind in ('booking.mail', 'support.mail')
        and (${bookingId ?? null}::text is null or (payload->>'bookingId' = ${bookingId ?? null}::text and payload->>'kind' = 'confirmation'))
      order by id`.execute(app.deps.database.db)
  ).rows;

/** A manual booking in the future: a confirmation job for the attendee and one for the owner. */
async function book(app: TestApp, token: string, chatInterfaceId: string, start: string) {
  const end = new Date(Date.parse(start) + 30 * 60_000).toISOString();
  const res = await app.request('POST', '/api/v1/bookings/manual', {
    token,
    body: { chatInterfaceId, start, end, attendee: { name: 'Tarpit Tess', email: 'tess@example.com', timeZone: 'UTC' } },
  });
  expect(res.status, res.text).toBe(201);
  return res.body.data.booking.id as string;
}

async function interfaceOf(app: TestApp, token: string) {
  const res = await app.request('POST', '/api/v1/chat-interfaces', { token, body: { name: 'Consulting' } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.chatInterface.id as string;
}

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanup.length > 0) await cleanup.pop()!();
});
afterAll(async () => {
  while (cleanup.length > 0) await cleanup.pop()!();
});

describe('mail on its own workers', () => {
  it("a booking's mails stuck in a tarpit do not delay another owner's document", async () => {
    const tarpit = await startTarpit();
    cleanup.push(() => tarpit.close());
    // The default worker counts (JOB_CONCURRENCY 4, MAIL_CONCURRENCY 2) and the default 60 s send deadline.
    const app = await startTestApp({ SMTP_URL: tarpit.url, RATE_LIMIT_DEFAULT: '10000' });
    cleanup.push(() => app.stop());
    const a = await app.signUp('tarpit-a');
    const b = await app.signUp('tarpit-b');

    const bookingId = await book(app, a.token, await interfaceOf(app, a.token), '2027-04-05T10:00:00.000Z');
    await eventually(async () => tarpit.open() === 2, 'both confirmations stalled in the tarpit', 10_000);
    expect((await mailJobs(app, bookingId)).map((j) => j.status)).toEqual(['running', 'running']);

    const config = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: b.token, body: { name: 'Docs' } })).body.data.config.id;
    const text = Buffer.from('Heat pumps move heat from the outside air into the house. '.repeat(26));
    const started = Date.now();
    const uploaded = await app.upload('/api/v1/knowledge-base/documents', {
      token: b.token,
      fileName: 'heat-pumps.txt',
      bytes: text,
      fields: { configId: config },
    });
    expect(uploaded.status, uploaded.text).toBe(201);
    const documentId = uploaded.body.data.document.id as string;
    let status = 'processing';
    await eventually(
      async () => {
        const list = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${config}`, { token: b.token });
        status = list.body.data.documents.find((d: { id: string }) => d.id === documentId).status;
        return status !== 'processing';
      },
      `owner b's document processed while the mails are stuck (status ${status})`,
      20_000,
    );
    const tookMs = Date.now() - started;
    expect(status).toBe('completed');
    // The mails were stuck the whole time: still running, their connections still open.
    expect((await mailJobs(app, bookingId)).map((j) => j.status)).toEqual(['running', 'running']);
    expect(tarpit.open()).toBe(2);
    expect(tarpit.lifetimes).toEqual([]);
    console.info(`mail-isolation: a ${text.length}-byte document completed in ${tookMs} ms with two mail sends stuck`);
  }, 60_000);
});

describe('the overall deadline of a send', () => {
  it('abandons a trickled send at SMTP_SEND_TIMEOUT_MS, closes its connection and retries it', async () => {
    const tarpit = await startTarpit();
    cleanup.push(() => tarpit.close());
    const smtp: TestSmtpServer = await startSmtpServer();
    cleanup.push(() => smtp.close());
    const app = await startTestApp({ SMTP_URL: tarpit.url, SMTP_SEND_TIMEOUT_MS: '1500', RATE_LIMIT_DEFAULT: '10000' });
    cleanup.push(() => app.stop());

    const contact = await app.request('POST', '/api/v1/support/contact', {
      body: { name: 'Ada', email: 'ada@example.com', subject: 'Stuck?', message: 'Is the mail stuck?' },
    });
    expect(contact.status, contact.text).toBe(202);
    const reference = contact.body.data.ticket.reference as string;

    await eventually(async () => tarpit.accepted() === 1, 'the confirmation reached the tarpit', 10_000);
    let job: MailJobRow | undefined;
    await eventually(
      async () => {
        [job] = await mailJobs(app);
        return job?.status === 'queued' && job.attempts === 1;
      },
      'the stalled send abandoned and its job queued for a retry',
      8_000,
    );
    // Its retry goes to a server that answers.
    tarpit.forwardTo(smtp.url);
    expect(job!.last_error).toContain('not finished within 1500 ms');
    expect(job!.due_in_ms).toBeGreaterThan(0);
    // The abandoned connection was closed by the client soon after the deadline (the connection opened a little after
    // the send's clock started: nodemailer is loaded with the first message).
    await eventually(async () => tarpit.lifetimes.length === 1, 'the abandoned connection closed', 3_000);
    expect(tarpit.lifetimes[0]).toBeGreaterThanOrEqual(500);
    expect(tarpit.lifetimes[0]).toBeLessThan(4_000);

    const [mail] = await smtp.waitFor((m) => m.envelope.to.includes('ada@example.com') && m.parsed.subject?.includes(reference) === true, 1, 15_000);
    expect(mail!.parsed.subject).toContain('We received your message');
    await eventually(async () => (await mailJobs(app))[0]?.status === 'done', 'the retried job done', 5_000);
    expect((await mailJobs(app))[0]).toMatchObject({ status: 'done', attempts: 2 });
  }, 60_000);
});

describe('stopping while sends are stuck', () => {
  it('finishes at once, closes the connections and counts the attempts, until the jobs are dead', async () => {
    const tarpit = await startTarpit();
    cleanup.push(() => tarpit.close());
    // This instance sends no mail; its peers (restarts of one mail worker) do.
    const app = await startTestApp({ SMTP_URL: tarpit.url, MAIL_CONCURRENCY: '0', RATE_LIMIT_DEFAULT: '10000' });
    cleanup.push(() => app.stop());
    const a = await app.signUp('tarpit-stop');
    const bookingId = await book(app, a.token, await interfaceOf(app, a.token), '2027-04-06T10:00:00.000Z');
    const db = app.deps.database.db;

    const runUntilStuckThenStop = async () => {
      // Due now (skips the backoff), as after a long enough restart.
      await sql`update jobs set run_at = now() where kind = 'booking.mail' and payload->>'bookingId' = ${bookingId}
        and payload->>'kind' = 'confirmation' and status = 'queued'`.execute(db);
      const openBefore = tarpit.open();
      const peer = await app.startPeer({ MAIL_CONCURRENCY: '2' });
      try {
        await eventually(async () => tarpit.open() === openBefore + 2, 'both sends stalled in the tarpit', 10_000);
      } catch (error) {
        await peer.stop();
        throw error;
      }
      const started = Date.now();
      await peer.stop();
      return Date.now() - started;
    };

    for (const attempt of [1, 2]) {
      const stopMs = await runUntilStuckThenStop();
      // The handlers stop with the queue's signal: nothing waits for the 8 s bound.
      expect(stopMs, `stop took ${stopMs} ms`).toBeLessThan(5_000);
      const jobs = await mailJobs(app, bookingId);
      expect(jobs.map((j) => [j.status, j.attempts, j.locked_by])).toEqual([
        ['queued', attempt, null],
        ['queued', attempt, null],
      ]);
      for (const job of jobs) expect(job.last_error).toContain('SMTP send abandoned: job queue stopping');
      await eventually(async () => tarpit.open() === 0, 'no connection left open by the stopped instance', 3_000);
    }

    // Each restart used an attempt; the last one ends the jobs instead of queueing them again.
    await sql`update jobs set attempts = max_attempts - 1 where kind = 'booking.mail' and payload->>'bookingId' = ${bookingId}
      and payload->>'kind' = 'confirmation'`.execute(db);
    expect(await runUntilStuckThenStop()).toBeLessThan(5_000);
    const dead = await mailJobs(app, bookingId);
    expect(dead.map((j) => [j.status, j.attempts === j.max_attempts])).toEqual([
      ['dead', true],
      ['dead', true],
    ]);
  }, 90_000);
});
