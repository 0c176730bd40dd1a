import { randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { deletedSchema, idParam, lookupId, namesNothing, saveWarningsSchema } from '../../schema/common.ts';
import { chatInterfaceSchema, createChatInterfaceInput, updateChatInterfaceInput } from '../../schema/chat-interfaces.ts';
import { rawResponseSchema, uploadedFileSchema } from '../../schema/uploads.ts';
import type { AppDeps } from '../context.ts';
import { ownerProcedure, publicProcedure, router } from '../trpc.ts';
import { AVATAR_MAX_UPLOAD_BYTES, processAvatar } from './avatar.ts';
import * as repo from './repository.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { lockOwnedConfigId } from '../knowledge-base/repository.ts';
import type { Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import { testConnectionProcedure } from './test-connection.ts';
import { toChatInterface } from './view.ts';
import { checkAddressAtSave, withWarnings } from '../address-at-save.ts';
import { cancelUpcomingOfInterface, linkOriginOf, toBooking } from '../bookings/booking-service.ts';

const tags = ['Chat interfaces'];
const notFound = () => new AppError('NOT_FOUND', 'Chat interface not found');

function slugFrom(name: string) {
  const base = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 48);
  return `${base || 'chat'}-${randomBytes(4).toString('hex')}`;
}

/** Saving an endpoint that points into a private network is refused at once, not at first use; a name that
 *  does not resolve yet is saved, with a warning (the call-time check is what protects). */
async function checkEndpoint(deps: Pick<AppDeps, 'http'>, url: string | null | undefined): Promise<string | undefined> {
  if (!url) return undefined;
  const checked = await checkAddressAtSave(deps.http, 'endpointUrl', url);
  if (checked.refused !== undefined) throw new AppError('VALIDATION_FAILED', 'endpointUrl is not allowed', `endpointUrl: ${checked.refused}`);
  return checked.warning;
}

/** A stored upstream key is never sent to a different host than the one it was saved for. */
async function hostChanged(db: AppDeps['database']['db'], ownerId: string, id: string, nextUrl: string | null | undefined) {
  if (nextUrl === undefined) return false;
  const current = await repo.findOwnedInterface(db, ownerId, id);
  if (!current?.endpoint_url || !nextUrl) return true;
  // Origin, not host: a key saved for https must not follow the endpoint to plain http.
  return new URL(current.endpoint_url).origin !== new URL(nextUrl).origin;
}

const conflict = () => new AppError('CONFLICT', 'Slug already in use', 'slug: choose another slug');

/**
 * configId must name one of the owner's knowledge bases (another owner's is as unknown as a missing one: 404, as the
 * spec's error table says). Checked in the transaction that stores it, with the row locked until it commits: a
 * deletion running at the same moment then detaches this interface too. Gives the id in its stored form.
 */
async function ownedConfigId<T extends string | null | undefined>(trx: Transaction<DB>, ownerId: string, configId: T): Promise<T | string> {
  if (!configId) return configId;
  const found = await lockOwnedConfigId(trx, ownerId, lookupId(configId));
  if (!found) throw new AppError('NOT_FOUND', 'Knowledge base configuration not found', 'configId: no knowledge base configuration with this id');
  return found;
}

export const chatInterfacesRouter = router({
  list: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/chat-interfaces', tags, summary: "List the caller's chat interfaces", protect: true } })
    .input(z.object({}).optional())
    .output(z.object({ chatInterfaces: z.array(chatInterfaceSchema), count: z.number().int() }))
    .query(async ({ ctx }) => {
      const rows = await repo.listOwnedInterfaces(ctx.deps.database.db, ctx.owner.id);
      return { chatInterfaces: rows.map(toChatInterface), count: rows.length };
    }),

  create: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/chat-interfaces',
        tags,
        summary: 'Create a chat interface',
        protect: true,
        errorResponses: { NOT_FOUND: 'configId names no knowledge base of the caller', CONFLICT: 'The slug is taken' },
      },
      successStatus: 201,
    })
    .input(createChatInterfaceInput)
    .output(z.object({ chatInterface: chatInterfaceSchema, warnings: saveWarningsSchema }))
    .mutation(async ({ ctx, input }) => {
      const warning = await checkEndpoint(ctx.deps, input.endpointUrl);
      try {
        const row = await withEvents(
          ctx.deps,
          async (trx) =>
            repo.insertInterface(trx, {
              id: randomUUID(),
              owner_id: ctx.owner.id,
              name: input.name,
              slug: input.slug ?? slugFrom(input.name),
              config_id: (await ownedConfigId(trx, ctx.owner.id, input.configId)) ?? null,
              endpoint_url: input.endpointUrl ?? null,
              endpoint_type: input.endpointType ?? null,
              endpoint_api_key_enc: input.apiKey ? ctx.deps.secrets.seal(input.apiKey) : null,
              welcome_message: input.welcomeMessage ?? null,
              placeholder: input.placeholder ?? null,
              primary_color: input.primaryColor ?? null,
              public: input.public ?? false,
              allowed_origins: [...new Set(input.allowedOrigins ?? [])],
            }),
          (created) => [webhookEvent(ctx.owner.id, 'chat_interface.created', toChatInterface(created))],
        );
        return withWarnings({ chatInterface: toChatInterface(row) }, [warning]);
      } catch (error) {
        if (isUniqueViolation(error)) throw conflict();
        throw error;
      }
    }),

  get: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/chat-interfaces/{id}', tags, summary: 'One chat interface', protect: true } })
    .input(z.object({ id: idParam }))
    .output(z.object({ chatInterface: chatInterfaceSchema }))
    .query(async ({ ctx, input }) => {
      const row = await repo.findOwnedInterface(ctx.deps.database.db, ctx.owner.id, input.id);
      if (!row) throw notFound();
      return { chatInterface: toChatInterface(row) };
    }),

  update: ownerProcedure
    .meta({
      openapi: {
        method: 'PATCH',
        path: '/api/v1/chat-interfaces/{id}',
        tags,
        summary: 'Update a chat interface (only the fields given)',
        protect: true,
        errorResponses: { CONFLICT: 'The slug is taken' },
      },
    })
    .input(updateChatInterfaceInput)
    .output(z.object({ chatInterface: chatInterfaceSchema, warnings: saveWarningsSchema }))
    .mutation(async ({ ctx, input }) => {
      if (namesNothing(input.id)) throw notFound();
      const warning = await checkEndpoint(ctx.deps, input.endpointUrl);
      const changes = {
        name: input.name,
        slug: input.slug,
        endpoint_url: input.endpointUrl,
        endpoint_type: input.endpointType,
        endpoint_api_key_enc:
          input.apiKey === null
            ? null
            : input.apiKey !== undefined
              ? ctx.deps.secrets.seal(input.apiKey)
              : (await hostChanged(ctx.deps.database.db, ctx.owner.id, input.id, input.endpointUrl))
                ? null
                : undefined,
        welcome_message: input.welcomeMessage,
        placeholder: input.placeholder,
        primary_color: input.primaryColor,
        public: input.public,
        allowed_origins: input.allowedOrigins && [...new Set(input.allowedOrigins)],
      };
      try {
        const row = await withEvents(
          ctx.deps,
          async (trx) => repo.updateInterface(trx, ctx.owner.id, input.id, { ...changes, config_id: await ownedConfigId(trx, ctx.owner.id, input.configId) }),
          (updated) => (updated ? [webhookEvent(ctx.owner.id, 'chat_interface.updated', toChatInterface(updated))] : []),
        );
        ctx.deps.apiKeyCache.invalidate();
        ctx.deps.domainRoutes.forgetInterface(input.id);
        if (!row) throw notFound();
        return withWarnings({ chatInterface: toChatInterface(row) }, [warning]);
      } catch (error) {
        if (isUniqueViolation(error)) throw conflict();
        throw error;
      }
    }),

  delete: ownerProcedure
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/api/v1/chat-interfaces/{id}',
        tags,
        summary: 'Delete a chat interface and its API keys; its upcoming bookings are cancelled first (attendees mailed, booking.cancelled)',
        protect: true,
      },
    })
    .input(z.object({ id: idParam }))
    .output(deletedSchema)
    .mutation(async ({ ctx, input }) => {
      const { deleted } = await withEvents(
        ctx.deps,
        async (trx) => {
          // Its bookings go by cascade: the upcoming ones are cancelled first, mails and events included, in the same
          // transaction (a crash leaves either both or neither).
          const cancelled = namesNothing(input.id)
            ? []
            : await cancelUpcomingOfInterface(ctx.deps, trx, { ownerId: ctx.owner.id, chatInterfaceId: input.id }, linkOriginOf(ctx));
          return { deleted: await repo.deleteInterface(trx, ctx.owner.id, input.id), cancelled };
        },
        ({ deleted, cancelled }) =>
          deleted
            ? [
                ...cancelled.map((row) => webhookEvent(ctx.owner.id, 'booking.cancelled', toBooking(row))),
                webhookEvent(ctx.owner.id, 'chat_interface.deleted', { id: input.id }),
              ]
            : [],
      );
      ctx.deps.mailJobs.notify();
      ctx.deps.apiKeyCache.invalidate();
      ctx.deps.domainRoutes.forgetInterface(input.id);
      // Its keys went with it (a cascade).
      ctx.deps.apiKeyListCache.forget(ctx.owner.id);
      if (!deleted) throw notFound();
      return { deleted: true as const, id: input.id };
    }),

  uploadAvatar: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/chat-interfaces/{id}/avatar',
        tags,
        summary: 'Upload the avatar/logo (resized to 256x256 WebP, metadata stripped)',
        protect: true,
        contentTypes: ['multipart/form-data'],
      },
      multipart: { fileField: 'file', maxBytes: AVATAR_MAX_UPLOAD_BYTES },
      rateLimit: 'upload',
    })
    .input(z.object({ id: idParam, file: uploadedFileSchema }))
    .output(z.object({ chatInterface: chatInterfaceSchema }))
    .mutation(async ({ ctx, input }) => {
      const db = ctx.deps.database.db;
      if (!(await repo.findOwnedInterface(db, ctx.owner.id, input.id))) throw notFound();
      const webp = await processAvatar(input.file.bytes);
      const updated = await withEvents(
        ctx.deps,
        async (trx) => (await repo.replaceAvatar(trx, ctx.owner.id, input.id, webp)) && (await repo.findOwnedInterface(trx, ctx.owner.id, input.id)),
        (changed) => (changed ? [webhookEvent(ctx.owner.id, 'chat_interface.updated', toChatInterface(changed))] : []),
      );
      if (!updated) throw notFound();
      return { chatInterface: toChatInterface(updated) };
    }),

  testConnection: testConnectionProcedure,

  avatar: publicProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/chat-interfaces/{id}/avatar',
        tags,
        summary: 'The avatar image (public: visitors see it in the widget)',
        contentTypes: ['image/webp'],
      },
      rawResponse: true,
    })
    .input(z.object({ id: idParam, v: z.string().max(20).optional() }))
    .output(rawResponseSchema)
    .query(async ({ ctx, input }) => {
      const row = await repo.findAvatar(ctx.deps.database.db, input.id);
      if (!row?.avatar_webp) throw new AppError('NOT_FOUND', 'Avatar not found');
      return { contentType: 'image/webp', body: row.avatar_webp, cacheControl: 'public, max-age=86400' };
    }),
});
