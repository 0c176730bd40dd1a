import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { idParam, idText, lookupId } from '../../schema/common.ts';
import { kbDocumentSchema } from '../../schema/knowledge-base.ts';
import { uploadedFileSchema } from '../../schema/uploads.ts';
import { ownerProcedure, router } from '../trpc.ts';
import { sniffDocumentKindDetailed } from '../../adapters/outbound/parsers/sniff.ts';
import * as repo from './repository.ts';
import { configNotFound, ownedConfigId } from './configs-router.ts';
import { documentFairKey, INGEST_JOB, type IngestPayload } from './jobs.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import type { AppDeps } from '../context.ts';
import { isForeignKeyViolation, isRefusedByDatabase } from '../../db/errors.ts';
import { createUploadInserts, type UploadInserts } from './upload-inserts.ts';

const tags = ['Knowledge base'];
const documentNotFound = () => new AppError('NOT_FOUND', 'Document not found');

/**
 * Files up to this size are kept in the database rather than the blob store: most text and Markdown documents,
 * few PDFs. Writing and reading a file costs thread-pool hand-overs whatever its size, a row only its bytes.
 */
export const INLINE_CONTENT_MAX_BYTES = 64 * 1024;

/** What the uploads of one service instance share, kept per database (each instance has its own). */
interface UploadState {
  /**
   * Configurations an upload has found its caller owns (`owner/config`), to spare every upload of a bulk load the
   * look-up statement. Safe to keep without invalidation: a configuration never changes owner, and one deleted
   * since is caught by the document insert's foreign key, which forgets it and answers 404. The ownership check
   * still comes before anything is written for a configuration not yet seen.
   */
  verifiedTargets: Set<string>;
  /** The uploads' inserts, grouped into shared statements. */
  inserts: UploadInserts;
}
const uploadStates = new WeakMap<object, UploadState>();
const MAX_VERIFIED_UPLOAD_TARGETS = 10_000;

function uploadStateOf(deps: Pick<AppDeps, 'database'>): UploadState {
  let state = uploadStates.get(deps.database);
  if (!state) {
    const db = deps.database.db;
    state = { verifiedTargets: new Set(), inserts: createUploadInserts((uploads) => repo.insertDocumentsWithJobs(db, uploads)) };
    uploadStates.set(deps.database, state);
  }
  return state;
}

async function uploadTarget(deps: Pick<AppDeps, 'database'>, ownerId: string, configId: string): Promise<{ configId: string; forget(): void }> {
  const verified = uploadStateOf(deps).verifiedTargets;
  const key = `${ownerId}/${configId}`;
  const forget = () => verified.delete(key);
  if (verified.has(key)) return { configId, forget };
  const owned = await ownedConfigId(deps, ownerId, configId);
  if (verified.size >= MAX_VERIFIED_UPLOAD_TARGETS) verified.clear();
  verified.add(key);
  return { configId: owned, forget };
}

export const kbDocumentsRouter = router({
  list: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/knowledge-base/documents',
        tags,
        summary: 'Documents of a knowledge base with their processing status',
        protect: true,
        errorResponses: { NOT_FOUND: 'configId names none of your configurations' },
      },
    })
    .input(z.object({ configId: idParam }))
    .output(z.object({ documents: z.array(kbDocumentSchema), count: z.number().int() }))
    .query(async ({ ctx, input }) => {
      const configId = await ownedConfigId(ctx.deps, ctx.owner.id, input.configId);
      const rows = await repo.listDocuments(ctx.deps.database.db, ctx.owner.id, configId);
      return { documents: rows.map(repo.toKbDocument), count: rows.length };
    }),

  upload: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/knowledge-base/documents',
        tags,
        summary: 'Upload a PDF, DOCX, TXT or MD file (multipart: file, configId); processing continues in the background',
        protect: true,
        contentTypes: ['multipart/form-data'],
        errorResponses: {
          NOT_FOUND: 'configId names none of your configurations',
          CONFLICT: 'The same content was uploaded before and that document was deleted during this upload: upload it once more',
        },
      },
      multipart: { fileField: 'file', maxBytes: 'plan' },
      rateLimit: 'upload',
      successStatus: 201,
      otherSuccess: {
        status: 200,
        description: 'The same content is already in this knowledge base: that document, with `duplicate: true` (a failed one is processed again)',
      },
    })
    .input(z.object({ configId: idParam, file: uploadedFileSchema }))
    .output(
      z.object({
        document: kbDocumentSchema,
        duplicate: z.boolean().meta({ description: 'true when identical content was already uploaded to this knowledge base (that document is returned)' }),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const { deps } = ctx;
      const db = deps.database.db;
      const target = await uploadTarget(deps, ctx.owner.id, input.configId);
      const configId = target.configId;
      const sniffed = await sniffDocumentKindDetailed(input.file.bytes, input.file.fileName);
      if (!sniffed.ok) throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported file', `file: ${sniffed.reason}`);
      const contentHash = createHash('sha256').update(input.file.bytes).digest('hex');
      // The insert itself finds a duplicate (ON CONFLICT on the content hash): a new document costs no
      // look-up first, and a duplicate, the rarer case, stores its bytes once in vain. A small file's bytes go in
      // the insert itself (kb_document_contents), a larger one's to the blob store first.
      const inline = input.file.bytes.byteLength <= INLINE_CONTENT_MAX_BYTES;
      const blobKey = inline ? null : await deps.blobs.put(configId, input.file.bytes);
      const documentId = randomUUID();
      let row: repo.KbDocumentRow | undefined;
      try {
        row = await uploadStateOf(deps).inserts.insert({
          document: {
            id: documentId,
            owner_id: ctx.owner.id,
            config_id: configId,
            file_name: input.file.fileName.slice(0, 255) || 'upload',
            kind: sniffed.kind,
            size_bytes: input.file.bytes.byteLength,
            content_hash: contentHash,
            blob_key: blobKey,
          },
          job: {
            id: randomUUID(),
            kind: INGEST_JOB,
            payload: JSON.stringify({ documentId, configId } satisfies IngestPayload),
            dedupeKey: `ingest:${documentId}`,
            fairKey: documentFairKey(ctx.owner.id),
          },
          content: inline ? input.file.bytes : undefined,
        });
      } catch (error) {
        if (!isForeignKeyViolation(error, 'kb_documents_config_id_fkey')) {
          // Freed only when the database refused the insert. After an error whose outcome is unknown (the
          // connection lost, perhaps after COMMIT, or while the statement still runs on the server) a row may hold
          // the file now or later: an orphaned file beats a document whose original is gone.
          if (blobKey && isRefusedByDatabase(error)) await deps.blobs.delete(blobKey);
          throw error;
        }
        // Deleted since this instance saw it (or during this upload): a put may have made its folder again, and
        // this upload's file goes with it.
        target.forget();
        if (blobKey) await deps.blobs.deletePrefix(configId);
        throw configNotFound();
      }
      const found = row ?? (await repo.findDocumentByHash(db, configId, contentHash));
      // Our own row (a group's statement that committed unseen, then this upload retried alone) is a new document.
      if (found?.id === documentId) {
        deps.jobs.notify();
        return { document: repo.toKbDocument(found), duplicate: false };
      }
      // Another upload's: this one's file is not needed. The answer is read after the file is freed, so a
      // deletion of that document meanwhile is seen (the 409 below) rather than answered as a duplicate.
      const existing = blobKey ? await deps.blobs.delete(blobKey).then(() => repo.findDocumentByHash(db, configId, contentHash)) : found;
      // Deleted between the insert and this look-up: as if it had never been there, the caller may upload again.
      if (!existing) throw new AppError('CONFLICT', 'The document was deleted while it was uploaded again; upload it once more');
      ctx.response.status = 200;
      if (existing.status !== 'failed') return { document: repo.toKbDocument(existing), duplicate: true };
      // The same file again after a failure is a retry: process it anew (the stored original is kept).
      const retried = await db.transaction().execute(async (trx) => {
        const again = await repo.retryFailedDocument(trx, existing.id, input.file.fileName.slice(0, 255) || existing.file_name);
        if (again) {
          const payload = { documentId: again.id, configId } satisfies IngestPayload;
          await deps.jobs.enqueue(INGEST_JOB, payload, { dedupeKey: `ingest:${again.id}`, fairKey: documentFairKey(ctx.owner.id) }, trx);
        }
        return again ?? existing;
      });
      deps.jobs.notify();
      return { document: repo.toKbDocument(retried), duplicate: true };
    }),

  delete: ownerProcedure
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/api/v1/knowledge-base/documents/{id}',
        tags,
        summary: 'Delete a document with its chunks, vectors, stored file and pending jobs',
        protect: true,
      },
    })
    .input(z.object({ id: idParam }))
    .output(z.object({ deleted: z.literal(true), id: z.string() }))
    .mutation(async ({ ctx, input }) => {
      const deleted = await deleteDocuments(ctx.deps, ctx.owner.id, [input.id]);
      if (deleted === 0) throw documentNotFound();
      return { deleted: true as const, id: input.id };
    }),

  bulkDelete: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/knowledge-base/documents/bulk-delete',
        tags,
        summary: "Delete up to 100 documents; data.deleted counts only the caller's own",
        protect: true,
      },
    })
    .input(z.object({ documentIds: z.array(idText).min(1, 'give at least one id').max(100, 'at most 100 ids per request') }))
    .output(z.object({ deleted: z.number().int(), requested: z.number().int() }))
    .mutation(async ({ ctx, input }) => {
      const unique = [...new Set(input.documentIds)];
      return { deleted: await deleteDocuments(ctx.deps, ctx.owner.id, unique.map(lookupId)), requested: unique.length };
    }),
});

/** `ids` have been through lookupId. */
async function deleteDocuments(deps: Pick<AppDeps, 'database' | 'webhookJobs' | 'jobs' | 'blobs'>, ownerId: string, ids: string[]): Promise<number> {
  const removed = await withEvents(
    deps,
    async (trx) => {
      await repo.lockConfigsOfDocuments(trx, ownerId, ids);
      const rows = await repo.deleteOwnedDocuments(trx, ownerId, ids);
      await deps.jobs.cancel(
        'documentId',
        rows.map((r) => r.id),
        trx,
      );
      for (const configId of new Set(rows.map((r) => r.config_id))) await repo.bumpContentVersion(trx, configId);
      return rows;
    },
    (rows) => rows.map((r) => webhookEvent(ownerId, 'document.deleted', { id: r.id, configId: r.config_id })),
  );
  // Bytes kept in the database went with their rows (cascade).
  await Promise.all(removed.map((r) => (r.blob_key ? deps.blobs.delete(r.blob_key) : undefined)));
  return removed.length;
}
