import { z } from 'zod';
import { idParam, namesNothing, queryInt } from '../../schema/common.ts';
import { AppError } from '../../schema/errors.ts';
import { leadSchema, leadSubmitInput } from '../../schema/visitors.ts';
import { ownerProcedure, router, visitorProcedure } from '../trpc.ts';
import * as chatRepo from '../chat/repository.ts';
import { findOwnedInterface } from '../chat-interfaces/repository.ts';
import { findConfig } from '../knowledge-base/repository.ts';
import { decodeCursor, encodeCursor } from '../pagination.ts';
import { visitorInterface } from '../visitors/access.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import { validateLeadFields } from './form.ts';
import * as repo from './repository.ts';

const tags = ['Leads'];

export const leadsRouter = router({
  submit: visitorProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/chat/{slug}/leads',
        tags,
        summary: "A visitor's answer to the lead-capture form (visitor token)",
        description: "The fields are checked against the form the interface's lead-capture tool defines. Emits `lead.created`.",
        protect: true,
        errorResponses: {
          FORBIDDEN: 'The visitor token is for another chat interface, or this interface does not collect contact details',
          NOT_FOUND: 'No public chat interface has this slug, or the session is not one of this visitor',
        },
      },
      successStatus: 201,
    })
    .input(leadSubmitInput)
    .output(z.object({ lead: z.object({ id: z.string(), createdAt: z.string() }) }))
    .mutation(async ({ ctx, input }) => {
      const db = ctx.deps.database.db;
      const iface = await visitorInterface(ctx.deps, ctx.visitor, input.slug);
      const kb = iface.config_id ? await findConfig(db, iface.owner_id, iface.config_id) : undefined;
      const fields = validateLeadFields(kb?.tools ?? [], input.fields);
      if (input.sessionId) {
        const session = await chatRepo.findSession(db, input.sessionId);
        if (!session || session.chat_interface_id !== iface.id || session.visitor_id !== ctx.visitor.visitorId) {
          throw new AppError('NOT_FOUND', 'Session not found');
        }
      }
      const row = await withEvents(
        ctx.deps,
        (trx) =>
          repo.insertLead(trx, {
            ownerId: iface.owner_id,
            chatInterfaceId: iface.id,
            visitorId: ctx.visitor.visitorId,
            sessionId: input.sessionId ?? null,
            fields,
          }),
        (created) => [webhookEvent(iface.owner_id, 'lead.created', repo.toLead(created))],
      );
      const lead = repo.toLead(row);
      return { lead: { id: lead.id, createdAt: lead.createdAt } };
    }),

  list: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/leads',
        tags,
        summary: 'Leads left by visitors of your interfaces, newest first, paginated',
        protect: true,
        errorResponses: { NOT_FOUND: 'chatInterfaceId names no chat interface of yours' },
      },
    })
    .input(
      z.object({
        chatInterfaceId: idParam.optional().meta({ description: 'Only this interface' }),
        limit: queryInt({ min: 1, max: 100 }).default(20),
        cursor: z.string().max(200).optional().meta({ description: 'nextCursor of the previous page' }),
      }),
    )
    .output(z.object({ leads: z.array(leadSchema), nextCursor: z.string().nullable(), hasMore: z.boolean() }))
    .query(async ({ ctx, input }) => {
      if (input.chatInterfaceId !== undefined) {
        const owned = !namesNothing(input.chatInterfaceId) && (await findOwnedInterface(ctx.deps.database.db, ctx.owner.id, input.chatInterfaceId));
        if (!owned) throw new AppError('NOT_FOUND', 'Chat interface not found');
      }
      const after = input.cursor ? decodeCursor(input.cursor) : undefined;
      const rows = await repo.listLeads(ctx.deps.database.db, ctx.owner.id, { limit: input.limit, chatInterfaceId: input.chatInterfaceId, after });
      const page = rows.slice(0, input.limit).map(repo.toLead);
      const hasMore = rows.length > input.limit;
      const last = page.at(-1);
      return { leads: page, nextCursor: hasMore && last ? encodeCursor(last.createdAt, last.id) : null, hasMore };
    }),
});
