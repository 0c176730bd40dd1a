import { sql, type Kysely } from 'kysely';
import { webhookOutboxFunction } from './0004_webhooks.ts';

/**
 * Jobs say whom they are for (`fair_key`), so a queue can share its workers fairly among tenants: webhook
 * deliveries and documents are keyed by their owner, so one owner's endpoint that answers only at the deadline no
 * longer holds every delivery worker while other owners' events wait behind its backlog, and one owner's bulk upload
 * no longer makes every other owner's documents wait for all of it (routers/jobs/repository.ts claimJobs).
 */
export async function up(db: Kysely<any>) {
  // Byte order ("C"): a queue walks only its own keys (`webhook:...`) as one index range, which other collations,
  // ignoring punctuation, would not keep together.
  await sql`alter table jobs add column fair_key text collate "C"`.execute(db);
  // The fair claim walks the distinct keys with queued jobs, taking each key's oldest, and counts what each runs.
  await sql`create index jobs_fair_ready_idx on jobs (fair_key, run_at) where status = 'queued' and fair_key is not null`.execute(db);
  await sql`create index jobs_fair_running_idx on jobs (fair_key) where status = 'running' and fair_key is not null`.execute(db);
  // And the jobs without a key apart (none, normally), not through other queues' backlogs.
  await sql`create index jobs_unkeyed_ready_idx on jobs (kind, run_at) where status = 'queued' and fair_key is null`.execute(db);
  await webhookOutboxFunction(true).execute(db);
  // Deliveries and documents already waiting take their owner's key too, each in its queue's own key space (a
  // queue counts the running jobs of a key: another queue's must not count).
  await sql`
    update jobs j set fair_key = 'webhook:' || d.owner_id::text
      from webhook_deliveries d
     where j.kind in ('webhook.deliver', 'webhook.replay') and j.status in ('queued', 'running') and j.payload->>'deliveryId' = d.id::text`.execute(db);
  await sql`
    update jobs j set fair_key = 'document:' || d.owner_id::text
      from kb_documents d
     where j.kind = 'kb.ingest' and j.status in ('queued', 'running') and j.payload->>'documentId' = d.id::text`.execute(db);
}

export async function down(db: Kysely<any>) {
  await webhookOutboxFunction(false).execute(db);
  await sql`drop index if exists jobs_unkeyed_ready_idx`.execute(db);
  await sql`drop index if exists jobs_fair_running_idx`.execute(db);
  await sql`drop index if exists jobs_fair_ready_idx`.execute(db);
  await sql`alter table jobs drop column fair_key`.execute(db);
}
