import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { idParam, isUuid } from '../../schema/common.ts';
import { kbDocumentSchema } from '../../schema/knowledge-base.ts';
import { uploadedFileSchema } from '../../schema/uploads.ts';
import { ownerProcedure, router } from '../trpc.ts';
import { isUniqueViolation } from '../chat-interfaces/repository.ts';
import { sniffDocumentKind } from '../../adapters/parsers/sniff.ts';
import * as repo from './repository.ts';
import { ownedConfig } from './configs-router.ts';
import { INGEST_JOB, type IngestPayload } from './jobs.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import type { AppDeps } from '../context.ts';

const tags = ['Knowledge base'];
const documentNotFound = () => new AppError('NOT_FOUND', 'Document not found');

export const kbDocumentsRouter = router({
  list: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/knowledge-base/documents', tags, summary: 'Documents of a knowledge base with their processing status', protect: true } })
    .input(z.object({ configId: idParam }))
    .output(z.object({ documents: z.array(kbDocumentSchema), count: z.number().int() }))
    .query(async ({ ctx, input }) => {
      const config = await ownedConfig(ctx.deps, ctx.owner.id, input.configId);
      const rows = await repo.listDocuments(ctx.deps.database.db, ctx.owner.id, config.id);
      return { documents: rows.map(repo.toKbDocument), count: rows.length };
    }),

  upload: ownerProcedure
    .meta({
      openapi: { method: 'POST', path: '/api/v1/knowledge-base/documents', tags, summary: 'Upload a PDF, DOCX, TXT or MD file (multipart: file, configId); processing continues in the background', protect: true, contentTypes: ['multipart/form-data'] },
      multipart: { fileField: 'file', maxBytes: 'plan' },
      rateLimit: 'upload',
      successStatus: 201,
    })
    .input(z.object({ configId: idParam, file: uploadedFileSchema }))
    .output(z.object({ document: kbDocumentSchema, duplicate: z.boolean().meta({ description: 'true when identical content was already uploaded to this knowledge base (that document is returned)' }) }))
    .mutation(async ({ ctx, input }) => {
      const { deps } = ctx;
      const db = deps.database.db;
      const config = await ownedConfig(deps, ctx.owner.id, input.configId);
      const sniffed = sniffDocumentKind(input.file.bytes, input.file.fileName);
      if (!sniffed.ok) throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported file', `file: ${sniffed.reason}`);
      const contentHash = createHash('sha256').update(input.file.bytes).digest('hex');
      const existing = await repo.findDocumentByHash(db, config.id, contentHash);
      if (existing) {
        ctx.response.status = 200;
        if (existing.status !== 'failed') return { document: repo.toKbDocument(existing), duplicate: true };
        // The same file again after a failure is a retry: process it anew (the stored original is kept).
        const retried = await db.transaction().execute(async (trx) => {
          const row = await trx
            .updateTable('kb_documents')
            .set({ status: 'processing', stage: 'uploaded', error: null, file_name: input.file.fileName.slice(0, 255) || existing.file_name, updated_at: new Date() })
            .where('id', '=', existing.id)
            .where('status', '=', 'failed')
            .returningAll()
            .executeTakeFirst();
          if (row) await deps.jobs.enqueue(INGEST_JOB, { documentId: row.id, configId: config.id } satisfies IngestPayload, { dedupeKey: `ingest:${row.id}` }, trx);
          return row ?? existing;
        });
        deps.jobs.notify();
        return { document: repo.toKbDocument(retried), duplicate: true };
      }

      const blobKey = await deps.blobs.put(config.id, input.file.bytes);
      try {
        const row = await db.transaction().execute(async (trx) => {
          const inserted = await trx
            .insertInto('kb_documents')
            .values({
              id: randomUUID(),
              owner_id: ctx.owner.id,
              config_id: config.id,
              file_name: input.file.fileName.slice(0, 255) || 'upload',
              kind: sniffed.kind,
              size_bytes: input.file.bytes.byteLength,
              content_hash: contentHash,
              blob_key: blobKey,
              status: 'processing',
              stage: 'uploaded',
            })
            .returningAll()
            .executeTakeFirstOrThrow();
          // Same transaction as the row: a document never exists without the job that finishes it.
          await deps.jobs.enqueue(INGEST_JOB, { documentId: inserted.id, configId: config.id } satisfies IngestPayload, { dedupeKey: `ingest:${inserted.id}` }, trx);
          return inserted;
        });
        deps.jobs.notify();
        return { document: repo.toKbDocument(row), duplicate: false };
      } catch (error) {
        await deps.blobs.delete(blobKey);
        if (isUniqueViolation(error)) {
          const raced = await repo.findDocumentByHash(db, config.id, contentHash);
          if (raced) {
            ctx.response.status = 200;
            return { document: repo.toKbDocument(raced), duplicate: true };
          }
        }
        throw error;
      }
    }),

  delete: ownerProcedure
    .meta({ openapi: { method: 'DELETE', path: '/api/v1/knowledge-base/documents/{id}', tags, summary: 'Delete a document with its chunks, vectors, stored file and pending jobs', protect: true } })
    .input(z.object({ id: idParam }))
    .output(z.object({ deleted: z.literal(true), id: z.string() }))
    .mutation(async ({ ctx, input }) => {
      const deleted = await deleteDocuments(ctx.deps, ctx.owner.id, [input.id]);
      if (deleted === 0) throw documentNotFound();
      return { deleted: true as const, id: input.id };
    }),

  bulkDelete: ownerProcedure
    .meta({ openapi: { method: 'POST', path: '/api/v1/knowledge-base/documents/bulk-delete', tags, summary: 'Delete up to 100 documents; data.deleted counts only the caller\'s own', protect: true } })
    .input(z.object({ documentIds: z.array(idParam).min(1, 'give at least one id').max(100, 'at most 100 ids per request') }))
    .output(z.object({ deleted: z.number().int(), requested: z.number().int() }))
    .mutation(async ({ ctx, input }) => {
      const unique = [...new Set(input.documentIds)];
      return { deleted: await deleteDocuments(ctx.deps, ctx.owner.id, unique), requested: unique.length };
    }),
});

async function deleteDocuments(deps: AppDeps, ownerId: string, ids: string[]): Promise<number> {
  const valid = ids.filter(isUuid);
  if (valid.length === 0) return 0;
  const removed = await withEvents(deps, async (trx) => {
    // Same lock order as ingestion (config rows first, then documents), so the two never deadlock.
    const configIds = (await trx.selectFrom('kb_documents').select('config_id').distinct().where('owner_id', '=', ownerId).where('id', 'in', valid).execute()).map((r) => r.config_id).sort();
    if (configIds.length > 0) await trx.selectFrom('kb_configs').select('id').where('id', 'in', configIds).orderBy('id').forNoKeyUpdate().execute();
    const rows = await trx.deleteFrom('kb_documents').where('owner_id', '=', ownerId).where('id', 'in', valid).returning(['id', 'config_id', 'blob_key']).execute();
    await repo.deleteJobsFor(trx, 'documentId', rows.map((r) => r.id));
    for (const configId of new Set(rows.map((r) => r.config_id))) await repo.bumpContentVersion(trx, configId);
    return rows;
  }, (rows) => rows.map((r) => webhookEvent(ownerId, 'document.deleted', { id: r.id, configId: r.config_id })));
  await Promise.all(removed.map((r) => deps.blobs.delete(r.blob_key)));
  return removed.length;
}
