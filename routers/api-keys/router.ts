import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { apiKeySchema, createApiKeyInput, createdApiKeySchema, updateApiKeyInput } from '../../schema/api-keys.ts';
import { deletedSchema, idParam } from '../../schema/common.ts';
import { ownerProcedure, router } from '../trpc.ts';
import { sha256Hex } from '../../adapters/outbound/secrets.ts';
import { findOwnedInterface } from '../chat-interfaces/repository.ts';
import { displayPrefix, generateApiKey } from './key-format.ts';
import * as keys from './repository.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';

const tags = ['API keys'];
const notFound = () => new AppError('NOT_FOUND', 'API key not found');

export const apiKeysRouter = router({
  list: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/api-keys', tags, summary: "List the caller's API keys", protect: true } })
    .input(z.object({}).optional())
    .output(z.object({ apiKeys: z.array(apiKeySchema), count: z.number().int() }))
    .query(async ({ ctx }) => {
      const db = ctx.deps.database.db;
      // One cached list answers many requests: it is frozen, and each answer gets its own copy of the array.
      const list = await ctx.deps.apiKeyListCache.lookup(ctx.owner.id, async () =>
        Object.freeze((await keys.listKeys(db, ctx.owner.id)).map((row) => Object.freeze(keys.toApiKey(row)))),
      );
      return { apiKeys: list ? [...list] : [], count: list?.length ?? 0 };
    }),

  create: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/api-keys',
        tags,
        summary: 'Create an API key for one chat interface (the key is shown once)',
        protect: true,
        errorResponses: { NOT_FOUND: 'chatInterfaceId names none of your chat interfaces' },
      },
      successStatus: 201,
    })
    .input(createApiKeyInput)
    .output(createdApiKeySchema)
    .mutation(async ({ ctx, input }) => {
      const db = ctx.deps.database.db;
      if (!(await findOwnedInterface(db, ctx.owner.id, input.chatInterfaceId))) {
        throw new AppError('NOT_FOUND', 'Chat interface not found', 'chatInterfaceId does not name one of your chat interfaces');
      }
      const key = generateApiKey();
      const row = await withEvents(
        ctx.deps,
        (trx) =>
          keys.insertKey(trx, {
            id: randomUUID(),
            owner_id: ctx.owner.id,
            chat_interface_id: input.chatInterfaceId,
            name: input.name,
            key_hash: sha256Hex(key),
            key_prefix: displayPrefix(key),
          }),
        (created) => [webhookEvent(ctx.owner.id, 'api_key.created', keys.toApiKey(created))],
      );
      ctx.deps.apiKeyListCache.forget(ctx.owner.id);
      return { apiKey: keys.toApiKey(row), key };
    }),

  get: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/api-keys/{id}', tags, summary: 'One API key', protect: true } })
    .input(z.object({ id: idParam }))
    .output(z.object({ apiKey: apiKeySchema }))
    .query(async ({ ctx, input }) => {
      const row = await keys.findKey(ctx.deps.database.db, ctx.owner.id, input.id);
      if (!row) throw notFound();
      return { apiKey: keys.toApiKey(row) };
    }),

  update: ownerProcedure
    .meta({ openapi: { method: 'PATCH', path: '/api/v1/api-keys/{id}', tags, summary: 'Rename or (de)activate an API key', protect: true } })
    .input(updateApiKeyInput)
    .output(z.object({ apiKey: apiKeySchema }))
    .mutation(async ({ ctx, input }) => {
      const { id, ...changes } = input;
      const row = await withEvents(
        ctx.deps,
        (trx) => keys.updateKey(trx, ctx.owner.id, id, changes),
        (updated) => (updated ? [webhookEvent(ctx.owner.id, 'api_key.updated', keys.toApiKey(updated))] : []),
      );
      ctx.deps.apiKeyCache.invalidate();
      ctx.deps.apiKeyListCache.forget(ctx.owner.id);
      if (!row) throw notFound();
      return { apiKey: keys.toApiKey(row) };
    }),

  delete: ownerProcedure
    .meta({ openapi: { method: 'DELETE', path: '/api/v1/api-keys/{id}', tags, summary: 'Delete an API key permanently', protect: true } })
    .input(z.object({ id: idParam }))
    .output(deletedSchema)
    .mutation(async ({ ctx, input }) => {
      const deleted = await withEvents(
        ctx.deps,
        (trx) => keys.deleteKey(trx, ctx.owner.id, input.id),
        (done) => (done ? [webhookEvent(ctx.owner.id, 'api_key.deleted', { id: input.id })] : []),
      );
      ctx.deps.apiKeyCache.invalidate();
      ctx.deps.apiKeyListCache.forget(ctx.owner.id);
      if (!deleted) throw notFound();
      return { deleted: true as const, id: input.id };
    }),
});
