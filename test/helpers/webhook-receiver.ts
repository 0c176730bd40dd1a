import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface ReceivedWebhook {
  headers: IncomingHttpHeaders;
  body: string;
  receivedAt: number;
}

export interface ReceiverReply {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /** Milliseconds to wait before answering. */
  delayMs?: number;
}

/**
 * A real HTTP receiver on 127.0.0.1 that records every request and answers as `reply` says (default 200).
 * `verify` checks a recorded delivery with the standardwebhooks library, exactly as a customer would.
 */
export interface WebhookReceiver {
  url: string;
  /** host:port, for OUTBOUND_ALLOW_HOSTS */
  hostPort: string;
  received: ReceivedWebhook[];
  reply: (request: ReceivedWebhook) => ReceiverReply;
  /** Requests received and not answered yet, now and at most so far (how many the sender had in flight). */
  open: number;
  mostOpen: number;
  /** Resolves once `count` requests (in total) have arrived, or rejects after timeoutMs. */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedWebhook[]>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(path = '/hooks'): Promise<WebhookReceiver> {
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const receiver = {
    received: [] as ReceivedWebhook[],
    reply: (() => ({})) as (request: ReceivedWebhook) => ReceiverReply,
    open: 0,
    mostOpen: 0,
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const request = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), receivedAt: Date.now() };
      if (req.method === 'POST') receiver.received.push(request);
      const answer = receiver.reply(request);
      receiver.open++;
      receiver.mostOpen = Math.max(receiver.mostOpen, receiver.open);
      let answered = false;
      res.on('close', () => {
        if (!answered) receiver.open--;
        answered = true;
      });
      const send = () => {
        // Unless the sender gave up and closed the connection already.
        if (!answered) {
          answered = true;
          receiver.open--;
          res.writeHead(answer.status ?? 200, { 'content-type': 'text/plain', ...answer.headers }).end(answer.body ?? 'ok');
        }
        for (const w of [...waiters]) if (receiver.received.length >= w.count) w.resolve();
      };
      if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
    });
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${port}${path}`,
    hostPort: `127.0.0.1:${port}`,
    waitFor(count: number, timeoutMs = 10_000) {
      if (receiver.received.length >= count) return Promise.resolve(receiver.received);
      return new Promise<ReceivedWebhook[]>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`receiver got ${receiver.received.length} of ${count} requests in ${timeoutMs} ms`)), timeoutMs);
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve(receiver.received);
          },
        });
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

/** Verifies a delivery as a receiver would; returns the parsed payload or throws WebhookVerificationError. */
export function verifyDelivery(secret: string, delivery: { headers: IncomingHttpHeaders; body: string }): any {
  const headers = {
    'webhook-id': String(delivery.headers['webhook-id'] ?? ''),
    'webhook-timestamp': String(delivery.headers['webhook-timestamp'] ?? ''),
    'webhook-signature': String(delivery.headers['webhook-signature'] ?? ''),
  };
  return new Webhook(secret).verify(delivery.body, headers);
}
