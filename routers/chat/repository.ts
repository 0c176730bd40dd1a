import { randomBytes, randomUUID } from 'node:crypto';
import type { Activity } from '../dashboard/activity.ts';
import { activityJson } from '../dashboard/repository.ts';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import { jsonb } from '../../db/json.ts';
import { toIso } from '../../schema/common.ts';
import { recordEvents, webhookEvent } from '../webhooks/outbox.ts';
import { DELIVER_JOB, DELIVER_JOB_MAX_ATTEMPTS, outboxEventsJson, type OutboxEvent } from '../webhooks/outbox-repository.ts';

type Db = Kysely<DB> | Transaction<DB>;

/** `api_<timestamp>_<random>`, the spec's format for generated session ids. */
export const newSessionId = () => `api_${Date.now()}_${randomBytes(6).toString('hex')}`;

export const findSession = (db: Db, id: string) => db.selectFrom('chat_sessions').selectAll().where('id', '=', id).executeTakeFirst();

export const findInterfaceBySlug = (db: Db, slug: string) =>
  db
    .selectFrom('chat_interfaces')
    .select(['id', 'owner_id', 'slug', 'config_id', 'endpoint_url', 'endpoint_type', 'endpoint_api_key_enc', 'public'])
    .where('slug', '=', slug)
    .executeTakeFirst();

/** The last `limit` messages of a session, oldest first. */
export async function recentMessages(db: Db, sessionId: string, limit: number) {
  if (limit <= 0) return [];
  const rows = await db
    .selectFrom('chat_messages')
    .select(['role', 'content'])
    .where('session_id', '=', sessionId)
    .orderBy('seq', 'desc')
    .limit(limit)
    .execute();
  return rows.reverse();
}

/** Messages written outside a visitor turn (an operator's reply), with their events, in one transaction. */
export async function appendMessages(
  db: Kysely<DB>,
  session: { id: string; chatInterfaceId: string; ownerId: string; isNew: boolean },
  messages: Array<{ role: 'user' | 'assistant' | 'operator'; content: string; sources?: unknown; usage?: unknown; toolCalls?: unknown }>,
) {
  return db.transaction().execute(async (trx) => {
    if (session.isNew) {
      await trx
        .insertInto('chat_sessions')
        .values({ id: session.id, chat_interface_id: session.chatInterfaceId, owner_id: session.ownerId, last_message_at: new Date() })
        .execute();
    } else {
      await trx.updateTable('chat_sessions').set({ last_message_at: new Date() }).where('id', '=', session.id).execute();
    }
    const rows = [];
    for (const m of messages) {
      rows.push(
        await trx
          .insertInto('chat_messages')
          .values({
            id: randomUUID(),
            session_id: session.id,
            role: m.role,
            content: m.content,
            sources: jsonb(m.sources ?? []),
            usage: m.usage === undefined ? null : jsonb(m.usage),
            tool_calls: jsonb(m.toolCalls ?? []),
          })
          .returningAll()
          .executeTakeFirstOrThrow(),
      );
    }
    const events = chatEvents(
      session,
      rows.map((r) => ({ id: r.id, role: r.role, content: r.content })),
    );
    const { queued } = await recordEvents(trx, events);
    return { rows, webhooksQueued: queued };
  });
}

function chatEvents(
  session: { id: string; chatInterfaceId: string; ownerId: string; isNew: boolean },
  messages: Array<{ id: string; role: 'user' | 'assistant' | 'operator'; content: string }>,
): OutboxEvent[] {
  const base = { sessionId: session.id, chatInterfaceId: session.chatInterfaceId };
  return [
    ...(session.isNew ? [webhookEvent(session.ownerId, 'chat_session.created', base)] : []),
    ...messages.map((m) => webhookEvent(session.ownerId, 'chat_message.created', { messageId: m.id, ...base, role: m.role, content: m.content })),
  ];
}

/**
 * One visitor turn (the message and the reply) in ONE statement: the session row is created or touched and
 * both messages are inserted atomically, without the round trips of BEGIN/INSERT.../COMMIT on the hot path.
 */
export async function recordExchange(
  db: Kysely<DB>,
  session: { id: string; chatInterfaceId: string; ownerId: string; isNew: boolean; visitorId?: string | null },
  exchange: { message: string; reply: string; sources: unknown; usage: unknown; toolCalls: unknown; activity: Activity },
): Promise<{ webhooksQueued: number }> {
  const userId = randomUUID();
  const replyId = randomUUID();
  const events = chatEvents(session, [
    { id: userId, role: 'user', content: exchange.message },
    { id: replyId, role: 'assistant', content: exchange.reply },
  ]);
  const json = (value: unknown) => sql`cast(${JSON.stringify(value)}::text as jsonb)`;
  const { rows } = await sql<{ queued: number }>`
    select record_chat_exchange(${session.id}, ${session.chatInterfaceId}::uuid, ${session.ownerId}::uuid,
      ${session.visitorId ?? null}::uuid, ${userId}::uuid, ${exchange.message}, ${replyId}::uuid, ${exchange.reply},
      ${json(exchange.sources)}, ${json(exchange.usage)}, ${json(exchange.toolCalls)},
      ${outboxEventsJson(events)}, ${DELIVER_JOB}, ${DELIVER_JOB_MAX_ATTEMPTS}, ${activityJson(exchange.activity)}) as queued`.execute(db);
  return { webhooksQueued: rows[0]?.queued ?? 0 };
}

export function toChatMessage(row: { id: string; role: string; content: string; sources: unknown; usage: unknown; tool_calls: unknown; created_at: Date }) {
  return {
    id: row.id,
    role: row.role as 'user' | 'assistant' | 'operator',
    content: row.content,
    sources: (row.sources ?? []) as unknown[],
    usage: (row.usage ?? null) as { promptTokens: number; completionTokens: number; totalTokens: number } | null,
    toolCalls: (row.tool_calls ?? []) as unknown[],
    createdAt: toIso(row.created_at)!,
  };
}

/** Newest first, at most `limit`. */
export const listMessages = (db: Db, sessionId: string, limit: number) =>
  db.selectFrom('chat_messages').selectAll().where('session_id', '=', sessionId).orderBy('seq', 'desc').limit(limit).execute();

/** The newest `limit` messages of a session, oldest first, and whether older ones exist. */
export async function historyPage(db: Db, session: { id: string; chat_interface_id: string }, limit: number) {
  const rows = await listMessages(db, session.id, limit + 1);
  const page = rows.slice(0, limit).reverse();
  return {
    sessionId: session.id,
    chatInterfaceId: session.chat_interface_id,
    messages: page.map(toChatMessage),
    count: page.length,
    hasMore: rows.length > limit,
  };
}
