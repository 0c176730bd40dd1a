import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import { jobPayloadNames } from '../jobs/repository.ts';

/** The SQL of an embedding model switch (reembed.ts): the chunks left to embed, the switch itself, its failure, the sweep. */

type Db = Kysely<DB> | Transaction<DB>;

/** The target embedding version under the same row lock as lockServingVersion (ingest-repository.ts). */
export const lockEmbeddingVersion = async (db: Db, configId: string) =>
  (await db.selectFrom('kb_configs').select(['embedding_version']).where('id', '=', configId).forNoKeyUpdate().executeTakeFirst())?.embedding_version;

/** Chunks of the configuration with no vector of `version` yet, in id order. */
export const chunksWithoutVector = (db: Db, configId: string, version: number, limit: number) =>
  db
    .selectFrom('kb_chunks')
    .select(['kb_chunks.id', 'kb_chunks.text'])
    .where('kb_chunks.config_id', '=', configId)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('kb_vectors').select('kb_vectors.chunk_id').whereRef('kb_vectors.chunk_id', '=', 'kb_chunks.id').where('kb_vectors.version', '=', version),
        ),
      ),
    )
    .orderBy('kb_chunks.id')
    .limit(limit)
    .execute();

export async function countChunksWithoutVector(db: Db, configId: string, version: number): Promise<number> {
  const { rows } = await sql<{ n: number }>`
        select count(*)::int as n from kb_chunks c
        where c.config_id = ${configId}
          and not exists (select 1 from kb_vectors v where v.chunk_id = c.id and v.version = ${version})`.execute(db);
  return rows[0]?.n ?? 0;
}

/**
 * Serving switches to `version` (model and key follow), and the vectors of every other version go. Answers the
 * row when serving changed (undefined when it already served `version`).
 */
export async function switchServingVersion(db: Db, configId: string, version: number) {
  const switched = await db
    .updateTable('kb_configs')
    .set((eb) => ({
      serving_version: version,
      serving_embedding: eb.ref('embedding'),
      serving_embedding_api_key_enc: eb.ref('embedding_api_key_enc'),
      embedding_error: null,
      content_version: eb('content_version', '+', 1),
      updated_at: new Date(),
    }))
    .where('id', '=', configId)
    .where('serving_version', '<>', version)
    .returningAll()
    .executeTakeFirst();
  await db.deleteFrom('kb_vectors').where('config_id', '=', configId).where('version', '<>', version).execute();
  return switched;
}

/**
 * Records why the switch to `version` failed, once, while `version` is still the target and not served. With
 * `unlessActiveJob` (a job kind), not while a job of that kind for this switch is queued or running: the sweep
 * must not fail a switch the owner has just restarted. Answers the row when it changed.
 */
export async function failEmbeddingSwitch(db: Db, configId: string, version: number, reason: string, unlessActiveJob?: string) {
  return db
    .updateTable('kb_configs')
    .set({ embedding_error: reason, updated_at: new Date() })
    .where('id', '=', configId)
    .where('embedding_version', '=', version)
    .where('serving_version', '<>', version)
    .where('embedding_error', 'is', null)
    .$if(unlessActiveJob !== undefined, (qb) =>
      qb.where(
        sql<boolean>`not exists (select 1 from jobs j where j.kind = ${unlessActiveJob} and j.status in ('queued', 'running') and ${reembedJobOf(sql`${configId}`, sql`${String(version)}`)})`,
      ),
    )
    .returningAll()
    .executeTakeFirst();
}

/** How a re-embedding job (alias `j`) names its configuration and version (payload `{configId, version}`). */
const reembedJobOf = (configId: RawBuilder<unknown>, version: RawBuilder<unknown>) =>
  sql`${jobPayloadNames('configId', configId)} and ${jobPayloadNames('version', version)}`;

/**
 * Configurations switching embedding models (target not served, no failure recorded) with no queued or running
 * re-embedding job (`kind`) for their target, and the status and error of the latest job there was: 'dead' when
 * it died without recording why (its last lease ran out), none or 'done' when it was lost. One statement: the
 * sweep runs at start-up and periodically.
 */
export async function findStalledEmbeddingSwitches(db: Db, kind: string) {
  const names = reembedJobOf(sql`c.id::text`, sql`c.embedding_version::text`);
  const { rows } = await sql<{ id: string; version: number; last_status: string | null; last_error: string | null }>`
    select c.id, c.embedding_version as version, latest.status as last_status, latest.last_error
    from kb_configs c
    left join lateral (
      select j.status, j.last_error from jobs j
      where j.kind = ${kind} and ${names}
      order by j.created_at desc, j.updated_at desc
      limit 1
    ) latest on true
    where c.serving_version <> c.embedding_version and c.embedding_error is null
      and not exists (select 1 from jobs j where j.kind = ${kind} and j.status in ('queued', 'running') and ${names})`.execute(db);
  return rows;
}
