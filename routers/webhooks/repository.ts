import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB, WebhookAttempt, WebhookDeliveryRow, WebhookRow } from '../../db/types.ts';
import { toIso } from '../../schema/common.ts';

type Db = Kysely<DB> | Transaction<DB>;

export function toWebhook(row: WebhookRow, now: Date) {
  const graceUntil =
    row.previous_secret_enc && row.previous_secret_expires_at && new Date(row.previous_secret_expires_at) > now ? row.previous_secret_expires_at : null;
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    events: row.events,
    enabled: row.enabled,
    disabledReason: row.disabled_reason,
    disabledAt: toIso(row.disabled_at),
    secretRotationGraceUntil: toIso(graceUntil),
    failingSince: toIso(row.failing_since),
    createdAt: toIso(row.created_at)!,
    updatedAt: toIso(row.updated_at)!,
  };
}

export function toDelivery(row: WebhookDeliveryRow & { event_type: string }) {
  return {
    deliveryId: row.id,
    webhookId: row.webhook_id,
    eventId: row.event_id,
    eventType: row.event_type,
    status: row.status,
    attemptCount: row.attempt_count,
    attempts: row.attempts,
    nextAttemptAt: toIso(row.next_attempt_at),
    lastHttpStatus: row.last_http_status,
    createdAt: toIso(row.created_at)!,
  };
}

export const listWebhooks = (db: Db, ownerId: string) =>
  db.selectFrom('webhooks').selectAll().where('owner_id', '=', ownerId).orderBy('created_at', 'desc').orderBy('id').execute();

export const findWebhook = (db: Db, ownerId: string, id: string) =>
  db.selectFrom('webhooks').selectAll().where('owner_id', '=', ownerId).where('id', '=', id).executeTakeFirst();

export const insertWebhook = (
  db: Db,
  row: { id: string; owner_id: string; url: string; description: string | null; events: string[]; enabled: boolean; secret_enc: string },
) => db.insertInto('webhooks').values(row).returningAll().executeTakeFirstOrThrow();

export function updateWebhook(
  db: Db,
  ownerId: string,
  id: string,
  changes: Partial<Pick<WebhookRow, 'url' | 'description' | 'events' | 'enabled' | 'disabled_reason' | 'disabled_at' | 'failing_since'>>,
) {
  return db
    .updateTable('webhooks')
    .set({ ...changes, updated_at: new Date() })
    .where('owner_id', '=', ownerId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export const rotateSecret = (db: Db, ownerId: string, id: string, change: { from: string; to: string; previousValidUntil: Date }) =>
  db
    .updateTable('webhooks')
    .set({ secret_enc: change.to, previous_secret_enc: change.from, previous_secret_expires_at: change.previousValidUntil, updated_at: new Date() })
    .where('owner_id', '=', ownerId)
    .where('id', '=', id)
    .where('secret_enc', '=', change.from)
    .returning('id')
    .executeTakeFirst();

export async function deleteWebhook(db: Db, ownerId: string, id: string) {
  const result = await db.deleteFrom('webhooks').where('owner_id', '=', ownerId).where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/** Pages newest first by (created_at, id); the cursor is the last row's pair. */
export function listDeliveries(db: Db, webhookId: string, page: { limit: number; after?: { createdAt: string; id: string }; status?: string }) {
  let query = db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
    .selectAll('d')
    .select('e.type as event_type')
    .where('d.webhook_id', '=', webhookId);
  if (page.status) query = query.where('d.status', '=', page.status as WebhookDeliveryRow['status']);
  if (page.after) {
    const { createdAt, id } = page.after;
    query = query.where(sql<boolean>`(d.created_at, d.id) < (${new Date(createdAt)}::timestamptz, ${id}::uuid)`);
  }
  return query
    .orderBy('d.created_at', 'desc')
    .orderBy('d.id', 'desc')
    .limit(page.limit + 1)
    .execute();
}

export const findDelivery = (db: Db, webhookId: string, deliveryId: string) =>
  db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
    .selectAll('d')
    .select('e.type as event_type')
    .where('d.webhook_id', '=', webhookId)
    .where('d.id', '=', deliveryId)
    .executeTakeFirst();

/** Everything one attempt needs, in one query. */
export const loadDeliveryForSend = (db: Db, deliveryId: string) =>
  db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
    .innerJoin('webhooks as w', 'w.id', 'd.webhook_id')
    .innerJoin('owners as o', 'o.id', 'd.owner_id')
    .select([
      'o.plan as owner_plan',
      'd.id',
      'd.status',
      'd.attempt_count',
      'd.next_attempt_at',
      'd.webhook_id',
      'd.owner_id',
      'e.id as event_id',
      'e.type as event_type',
      'e.body',
      'w.url',
      'w.enabled',
      'w.secret_enc',
      'w.previous_secret_enc',
      'w.previous_secret_expires_at',
    ])
    .where('d.id', '=', deliveryId)
    .executeTakeFirst();

export type DeliveryForSend = NonNullable<Awaited<ReturnType<typeof loadDeliveryForSend>>>;

/**
 * Appends an attempt and applies its outcome. A delivery that succeeded stays succeeded whatever a concurrent
 * attempt (the automatic one and a replay may overlap) reports later; `keepStatus` (a failed replay) changes
 * nothing but a never-tried `pending` into `failed`. Returns the status and next attempt as stored.
 */
export async function saveAttempt(
  db: Db,
  deliveryId: string,
  change: { status: WebhookDeliveryRow['status'] | 'keep'; countsAsAutomatic: boolean; nextAttemptAt: Date | null; attempt: WebhookAttempt },
) {
  const status =
    change.status === 'keep'
      ? sql<WebhookDeliveryRow['status']>`case when status = 'pending' then 'failed' else status end`
      : sql<WebhookDeliveryRow['status']>`case when status = 'succeeded' then 'succeeded' else ${change.status}::text end`;
  const next =
    change.status === 'keep'
      ? sql<Date | null>`next_attempt_at`
      : sql<Date | null>`case when status = 'succeeded' then null else ${change.nextAttemptAt}::timestamptz end`;
  return db
    .updateTable('webhook_deliveries')
    .set((eb) => ({
      status,
      next_attempt_at: next,
      attempt_count: change.countsAsAutomatic ? eb('attempt_count', '+', 1) : eb.ref('attempt_count'),
      attempts: sql<string>`attempts || jsonb_build_array(cast(${JSON.stringify(change.attempt)}::text as jsonb))`,
      last_attempt_at: new Date(change.attempt.at),
      last_http_status: change.attempt.httpStatus,
      updated_at: new Date(),
    }))
    .where('id', '=', deliveryId)
    .returning(['status', 'next_attempt_at'])
    .executeTakeFirst();
}

/** Success clears the failure streak; a failure starts it (once) and returns the endpoint's state after. */
export async function recordEndpointOutcome(db: Db, webhookId: string, succeeded: boolean, at: Date) {
  if (succeeded) {
    await db.updateTable('webhooks').set({ failing_since: null, last_success_at: at }).where('id', '=', webhookId).execute();
    return undefined;
  }
  return db
    .updateTable('webhooks')
    .set({ failing_since: sql<Date>`coalesce(failing_since, ${at}::timestamptz)` })
    .where('id', '=', webhookId)
    .returning(['id', 'owner_id', 'url', 'enabled', 'failing_since'])
    .executeTakeFirst();
}

/** Disables an endpoint that is still enabled; returns it when this call did the disabling. */
/** Disables every enabled endpoint of the owner, as `account_linked`: their deliveries end as not sent. */
export async function disableOwnerEndpoints(db: Db, ownerId: string, at: Date): Promise<void> {
  await db
    .updateTable('webhooks')
    .set({ enabled: false, disabled_reason: 'account_linked', disabled_at: at, updated_at: at })
    .where('owner_id', '=', ownerId)
    .where('enabled', '=', true)
    .execute();
}

export const disableEndpoint = (db: Db, webhookId: string, reason: 'gone' | 'failing', at: Date) =>
  db
    .updateTable('webhooks')
    .set({ enabled: false, disabled_reason: reason, disabled_at: at, updated_at: at })
    .where('id', '=', webhookId)
    .where('enabled', '=', true)
    .returning(['id', 'owner_id', 'url'])
    .executeTakeFirst();

export interface WebhookStatsRow {
  webhook_id: string;
  deliveries: number;
  succeeded: number;
  failed: number;
  pending: number;
  last_failure_at: Date | null;
  last_failure_status: number | null;
}

export async function deliveryStats(db: Db, ownerId: string, webhookIds: string[]) {
  if (webhookIds.length === 0) return new Map<string, WebhookStatsRow>();
  const { rows } = await sql<WebhookStatsRow>`
    select d.webhook_id,
           count(*)::int as deliveries,
           count(*) filter (where d.status = 'succeeded')::int as succeeded,
           count(*) filter (where d.status in ('failed', 'exhausted'))::int as failed,
           count(*) filter (where d.status = 'pending')::int as pending,
           max(d.last_attempt_at) filter (where d.status in ('failed', 'exhausted')) as last_failure_at,
           (array_agg(d.last_http_status order by d.last_attempt_at desc) filter (where d.status in ('failed', 'exhausted')))[1] as last_failure_status
      from webhook_deliveries d
     where d.owner_id = ${ownerId}::uuid and d.webhook_id in (${sql.join(webhookIds.map((id) => sql`${id}::uuid`))})
     group by d.webhook_id`.execute(db);
  return new Map(rows.map((r) => [r.webhook_id, r]));
}

/**
 * Deliveries still owed an attempt (older than a few seconds) that have no queued or running job (`kind`, keyed
 * `webhook:<delivery id>`), and whether their job died (with its last error). One statement.
 */
export async function findOrphanedDeliveries(db: Db, kind: string, limit: number) {
  const { rows } = await sql<{ id: string; owner_id: string; dead_error: string | null; dead: boolean }>`
    select d.id, d.owner_id,
      exists (select 1 from jobs j where j.kind = ${kind} and j.status = 'dead' and j.dedupe_key = 'webhook:' || d.id::text) as dead,
      (select j.last_error from jobs j where j.kind = ${kind} and j.status = 'dead' and j.dedupe_key = 'webhook:' || d.id::text order by j.updated_at desc limit 1) as dead_error
    from webhook_deliveries d
    where (d.status = 'pending' or (d.status = 'failed' and d.next_attempt_at is not null))
      and d.created_at < now() - interval '5 seconds'
      and not exists (select 1 from jobs j where j.dedupe_key = 'webhook:' || d.id::text and j.status in ('queued', 'running'))
    limit ${limit}`.execute(db);
  return rows;
}

/** Ends a delivery as failed for good, with the attempt that says why. */
export async function appendFinalAttempt(db: Db, deliveryId: string, attempt: WebhookAttempt) {
  await db
    .updateTable('webhook_deliveries')
    .set({
      status: 'failed',
      next_attempt_at: null,
      attempts: sql<string>`attempts || jsonb_build_array(cast(${JSON.stringify(attempt)}::text as jsonb))`,
      updated_at: new Date(),
    })
    .where('id', '=', deliveryId)
    .execute();
}

/** How many webhook endpoints each of these owners has. */
export async function countWebhooksByOwner(db: Db, ownerIds: string[]): Promise<Map<string, number>> {
  if (ownerIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('webhooks')
    .select(['owner_id', (eb) => eb.fn.countAll<number>().as('n')])
    .where('owner_id', 'in', ownerIds)
    .groupBy('owner_id')
    .execute();
  return new Map(rows.map((r) => [r.owner_id, Number(r.n)]));
}

/** Deliveries still to be made, and how long the oldest has waited (admin status). */
export async function deliveryBacklog(db: Db) {
  const { rows } = await sql<{ pending: number; oldest_seconds: number | null }>`
    select count(*)::int as pending, extract(epoch from now() - min(created_at))::float8 as oldest_seconds
    from webhook_deliveries where status = 'pending'`.execute(db);
  return rows[0] ?? { pending: 0, oldest_seconds: null };
}

/** One owner's deliveries not delivered yet: waiting for a first attempt or for a retry (monitoring). */
export async function ownerDeliveryBacklog(db: Db, ownerId: string) {
  const { rows } = await sql<{ pending: number; oldest_seconds: number | null }>`
    select count(*)::int as pending, extract(epoch from now() - min(d.created_at))::float8 as oldest_seconds
    from webhook_deliveries d join webhooks w on w.id = d.webhook_id
    where w.owner_id = ${ownerId}::uuid
      and (d.status = 'pending' or (d.status = 'failed' and d.next_attempt_at is not null))`.execute(db);
  return rows[0] ?? { pending: 0, oldest_seconds: null };
}
