import type { AddressInfo } from 'node:net';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/** A real SMTP server on 127.0.0.1 that records every message it accepts. Accepts any (or no) authentication; no TLS. */
export interface TestSmtpServer {
  /** 'smtp://127.0.0.1:<port>' */
  url: string;
  messages: Array<{ envelope: { from: string; to: string[] }; raw: string; parsed: ParsedMail }>;
  /** Resolves when `count` messages matching `predicate` have arrived (polls, rejects after timeoutMs, default 10 s). */
  waitFor(predicate: (m: TestSmtpServer['messages'][number]) => boolean, count?: number, timeoutMs?: number): Promise<TestSmtpServer['messages']>;
  /** Makes the next `n` RCPT/DATA fail with a 451 temporary error (to test retries). */
  failNext(n: number): void;
  close(): Promise<void>;
}

export async function startSmtpServer(): Promise<TestSmtpServer> {
  const messages: TestSmtpServer['messages'] = [];
  let failures = 0;
  const temporaryFailure = () => {
    if (failures <= 0) return null;
    failures--;
    return Object.assign(new Error('Requested action aborted: local error in processing (test failure)'), { responseCode: 451 });
  };

  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    // Connections a client keeps open (pooled transports) do not hold close() up for long.
    closeTimeout: 1_000,
    onAuth(_auth, _session, callback) {
      callback(null, { user: 'test' });
    },
    onRcptTo(_address, _session, callback) {
      callback(temporaryFailure());
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', (err) => callback(err));
      stream.on('end', () => {
        const failure = temporaryFailure();
        if (failure) return callback(failure);
        const raw = Buffer.concat(chunks).toString('utf8');
        const envelope = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
        };
        simpleParser(raw).then(
          (parsed) => {
            messages.push({ envelope, raw, parsed });
            callback();
          },
          (err: Error) => callback(err),
        );
      });
    },
  });
  server.on('error', () => {}); // client resets in failure tests are not the server's problem

  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.server.address() as AddressInfo;

  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    waitFor(predicate, count = 1, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      return new Promise((resolve, reject) => {
        const poll = () => {
          const matching = messages.filter(predicate);
          if (matching.length >= count) return resolve(matching);
          if (Date.now() >= deadline) return reject(new Error(`SMTP server got ${matching.length} of ${count} matching messages in ${timeoutMs} ms`));
          setTimeout(poll, 20);
        };
        poll();
      });
    },
    failNext(n) {
      failures = n;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
