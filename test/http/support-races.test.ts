import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestResponse } from '../helpers/test-app.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * Two PATCHes of one ticket sent together, through the real listener: the transition check and the write are one
 * step, so the outcome is always one a client could meet sending them one after the other (closed then pending is
 * a 409 together too, never a closed ticket turned pending), and the owner's webhooks get `support_ticket.updated`
 * for exactly the changes that were answered 200.
 */

type Status = 'open' | 'pending' | 'resolved' | 'closed';
type Patch = { status?: Status; reply?: string };

/** The allowed moves, as README.md's Support section states them (kept apart from the router's own table). */
const ALLOWED: Record<Status, Status[]> = {
  open: ['pending', 'resolved', 'closed'],
  pending: ['open', 'resolved', 'closed'],
  resolved: ['open', 'closed'],
  closed: ['open'],
};

interface Outcome {
  /** Per request, in the order given: 200 with the ticket's status after it, or 409. */
  answers: Array<{ code: 200; status: Status } | { code: 409 }>;
  final: Status;
}

/** What the requests give when applied one after the other in `order` (indexes into `patches`). */
function serially(start: Status, patches: Patch[], order: number[]): Outcome {
  let current = start;
  const answers: Outcome['answers'] = new Array(patches.length);
  for (const i of order) {
    const patch = patches[i]!;
    const target = patch.status ?? (patch.reply && current === 'open' ? 'pending' : undefined);
    if (target && target !== current && !ALLOWED[current].includes(target)) {
      answers[i] = { code: 409 };
      continue;
    }
    current = target ?? current;
    answers[i] = { code: 200, status: current };
  }
  return { answers, final: current };
}

const ROUNDS = 10;

let app: TestApp;
let receiver: WebhookReceiver;
let owner: { token: string; ownerId: string };
let other: { token: string; ownerId: string };
let admin: { token: string; ownerId: string };
let iface: { id: string };

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  app = await startTestApp({
    OUTBOUND_ALLOW_HOSTS: receiver.hostPort,
    RATE_LIMIT_SUPPORT: '10000',
    RATE_LIMIT_SUPPORT_GLOBAL: '10000',
    RATE_LIMIT_DEFAULT: '10000',
  });
  owner = await app.signUp('support-race');
  other = await app.signUp('support-race-other');
  admin = await app.signUp('support-race-admin');
  await app.setOwner(owner.ownerId, { plan: 'enterprise' });
  await app.setOwner(admin.ownerId, { role: 'admin' });
  const hook = await app.request('POST', '/api/v1/enterprise/webhooks', {
    token: owner.token,
    body: { url: receiver.url, events: ['support_ticket.updated'] },
  });
  expect(hook.status, hook.text).toBe(201);
  const kb = await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name: 'Help' } });
  const created = await app.request('POST', '/api/v1/chat-interfaces', {
    token: owner.token,
    body: { name: 'Race help', configId: kb.body.data.config.id, public: true },
  });
  expect(created.status, created.text).toBe(201);
  iface = { id: created.body.data.chatInterface.id };
});
afterAll(async () => {
  await app?.stop();
  await receiver?.close();
});

/** A fresh open ticket addressed to `owner` (a hand-off from their interface). */
async function openTicket(round: number): Promise<string> {
  const res = await app.request('POST', '/api/v1/support/contact', {
    body: { name: 'Ada', email: `race-${round}@example.com`, subject: `Race ${round}`, message: 'Help', chatInterfaceId: iface.id },
  });
  expect(res.status, res.text).toBe(202);
  const row = await app.deps.database.db
    .selectFrom('support_tickets')
    .select('id')
    .where('reference', '=', res.body.data.ticket.reference)
    .executeTakeFirstOrThrow();
  return row.id;
}

/** The statuses carried by the `support_ticket.updated` events recorded for a ticket. */
async function eventStatuses(ticketId: string): Promise<Status[]> {
  const rows = await app.deps.database.db
    .selectFrom('webhook_events')
    .select('body')
    .where('owner_id', '=', owner.ownerId)
    .where('type', '=', 'support_ticket.updated')
    .execute();
  return rows
    .map((r) => JSON.parse(r.body) as { data: { id: string; status: Status } })
    .filter((e) => e.data.id === ticketId)
    .map((e) => e.data.status)
    .sort();
}

/**
 * Sends the patches together (each with its token) on a fresh open ticket and checks the outcome against the two
 * serial orders: the answers, the final status and the events must all be those of one of them.
 */
async function race(round: number, patches: Array<{ token: string; body: Patch }>) {
  const ticketId = await openTicket(round);
  const answers: TestResponse[] = await Promise.all(
    patches.map((p) => app.request('PATCH', `/api/v1/support/tickets/${ticketId}`, { token: p.token, body: p.body })),
  );
  const final = (await app.request('GET', `/api/v1/support/tickets/${ticketId}`, { token: owner.token })).body.data.ticket.status as Status;
  const seen: Outcome = {
    answers: answers.map((res) => {
      expect([200, 409], `round ${round}: ${res.status} ${res.text}`).toContain(res.status);
      if (res.status === 409) expect(res.body).toMatchObject({ success: false, error: { code: 'CONFLICT' } });
      return res.status === 200 ? { code: 200 as const, status: res.body.data.ticket.status as Status } : { code: 409 as const };
    }),
    final,
  };
  const bodies = patches.map((p) => p.body);
  const serial = [serially('open', bodies, [0, 1]), serially('open', bodies, [1, 0])];
  const what = `round ${round}: ${JSON.stringify(bodies)} answered ${JSON.stringify(seen)}; one after the other: ${JSON.stringify(serial)}`;
  expect(serial, what).toContainEqual(seen);
  // One event per change answered 200, carrying the status that change left; none for a refused one.
  const expectedEvents = seen.answers.flatMap((a) => (a.code === 200 ? [a.status] : [])).sort();
  expect(await eventStatuses(ticketId), what).toEqual(expectedEvents);
  return seen;
}

describe('concurrent changes of one ticket', () => {
  it('closed and pending sent together: closed always wins, pending is 200 only if it came first', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const seen = await race(round, [
        { token: owner.token, body: { status: 'closed' } },
        { token: owner.token, body: { status: 'pending' } },
      ]);
      // Both 200 only in the order pending, closed; closed first refuses pending (409, as one after the other).
      expect(seen.final).toBe('closed');
    }
  });

  it('a reply (open → pending) racing a close never reopens the closed ticket as pending', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const seen = await race(100 + round, [
        { token: owner.token, body: { status: 'closed' } },
        { token: owner.token, body: { reply: 'We are looking into it.' } },
      ]);
      expect(seen.final).toBe('closed');
    }
  });

  it('the admin path takes the same lock: an admin’s resolve racing the owner’s close', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      // open → resolved → closed is allowed, closed → resolved is not.
      const seen = await race(200 + round, [
        { token: owner.token, body: { status: 'closed' } },
        { token: admin.token, body: { status: 'resolved' } },
      ]);
      expect(seen.final).toBe('closed');
    }
  });

  it('another owner’s PATCH racing the owner’s is a 404 and changes nothing', async () => {
    for (let round = 0; round < 3; round++) {
      const ticketId = await openTicket(300 + round);
      const [mine, theirs] = await Promise.all([
        app.request('PATCH', `/api/v1/support/tickets/${ticketId}`, { token: owner.token, body: { status: 'resolved' } }),
        app.request('PATCH', `/api/v1/support/tickets/${ticketId}`, { token: other.token, body: { status: 'closed', reply: 'Not mine' } }),
      ]);
      expect(mine.status, mine.text).toBe(200);
      expect(theirs.status, theirs.text).toBe(404);
      expect(theirs.body).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
      const detail = await app.request('GET', `/api/v1/support/tickets/${ticketId}`, { token: owner.token });
      expect(detail.body.data.ticket.status).toBe('resolved');
      expect(detail.body.data.messages.map((m: { author: string }) => m.author)).toEqual(['requester']);
      expect(await eventStatuses(ticketId)).toEqual(['resolved']);
    }
  });
});
