import { z } from 'zod';
import { timestamp } from '../../schema/common.ts';
import { AppError } from '../../schema/errors.ts';
import { chatMessageSchema, sessionIdSchema } from '../../schema/chat.ts';
import { attendeeInput, instantInput, timeZoneSchema } from '../../schema/bookings.ts';
import * as chatRepo from '../chat/repository.ts';
import { findConfig } from '../knowledge-base/repository.ts';
import { router, visitorProcedure } from '../trpc.ts';
import { visitorInterface } from '../visitors/access.ts';
import type { AppDeps } from '../context.ts';
import { createBooking, linkOriginOf } from './booking-service.ts';
import { slotsOf, slotsOutput } from './router.ts';
import { localIso } from './slots.ts';

const tags = ['Bookings'];

/** A visitor may see slots and book only where the interface's knowledge base offers booking (the book_slot tool). */
async function bookableInterface(deps: Pick<AppDeps, 'database'>, visitor: { chatInterfaceId: string }, slug: string) {
  const iface = await visitorInterface(deps, visitor, slug);
  const kb = iface.config_id ? await findConfig(deps.database.db, iface.owner_id, iface.config_id) : undefined;
  if (!kb?.tools.some((tool) => tool.name === 'book_slot' && tool.enabled)) throw new AppError('FORBIDDEN', 'This chat interface does not take bookings');
  return iface;
}

const visitorBookingSchema = z.object({
  id: z.string(),
  status: z.enum(['confirmed', 'cancelled']),
  start: timestamp,
  end: timestamp,
  localStart: z.string().meta({ description: "The start in the visitor's time zone" }),
});

export const bookingsVisitorRouter = router({
  slots: visitorProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/chat/{slug}/bookings/available-slots',
        tags,
        summary: 'Free slots of the interface for its visitor (visitor token; addition)',
        protect: true,
        errorResponses: {
          FORBIDDEN: 'The token is for another interface, or this interface does not take bookings',
          NOT_FOUND: 'No public chat interface has this slug',
        },
      },
    })
    .input(
      z.object({
        slug: z.string().min(1).max(100),
        from: instantInput.optional(),
        to: instantInput.optional(),
        timeZone: timeZoneSchema.optional().meta({ description: "The visitor's zone for localStart and localEnd" }),
      }),
    )
    .output(slotsOutput)
    .query(async ({ ctx, input }) => {
      const iface = await bookableInterface(ctx.deps, ctx.visitor, input.slug);
      return slotsOf(ctx, iface.id, input);
    }),

  book: visitorProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/chat/{slug}/bookings',
        tags,
        summary: 'The visitor books one of the offered slots from the chat (visitor token; addition)',
        description:
          'The booking is confirmed in the conversation named by sessionId (an assistant message whose toolCalls carry it); attendee and owner get the calendar invitation by mail, with a cancellation link for the attendee.',
        protect: true,
        errorResponses: {
          FORBIDDEN: 'The token is for another interface, or this interface does not take bookings',
          NOT_FOUND: 'No public chat interface has this slug, or the session is not one of this visitor',
          CONFLICT:
            'The slot is not free any more, this visitor already holds BOOKINGS_PER_VISITOR upcoming bookings here, or the interface has no booking hours yet',
        },
      },
      successStatus: 201,
    })
    .input(
      z.object({
        slug: z.string().min(1).max(100),
        sessionId: sessionIdSchema.optional(),
        start: instantInput,
        attendee: attendeeInput,
        notes: z.string().max(2000).optional(),
      }),
    )
    .output(z.object({ booking: visitorBookingSchema, message: chatMessageSchema.nullable() }))
    .mutation(async ({ ctx, input }) => {
      const db = ctx.deps.database.db;
      const iface = await bookableInterface(ctx.deps, ctx.visitor, input.slug);
      const session = input.sessionId ? await chatRepo.findSession(db, input.sessionId) : undefined;
      if (input.sessionId && (!session || session.chat_interface_id !== iface.id || session.visitor_id !== ctx.visitor.visitorId)) {
        throw new AppError('NOT_FOUND', 'Session not found');
      }
      const start = new Date(input.start);
      if (Number.isNaN(start.getTime())) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', 'start: not a date-time');
      const row = await createBooking(ctx.deps, {
        ownerId: iface.owner_id,
        chatInterfaceId: iface.id,
        start,
        attendee: input.attendee,
        notes: input.notes,
        source: 'chat',
        visitorId: ctx.visitor.visitorId,
        visitorCaps: { livePerVisitor: ctx.deps.config.BOOKINGS_PER_VISITOR, perInterfaceHour: ctx.deps.config.BOOKINGS_PER_INTERFACE_HOUR },
        sessionId: session?.id ?? null,
        linkOrigin: linkOriginOf(ctx),
      });
      const booking = {
        id: row.id,
        status: row.status,
        start: row.start_at.toISOString(),
        end: row.end_at.toISOString(),
        localStart: localIso(row.start_at, row.attendee_time_zone),
      };
      if (!session) return { booking, message: null };
      const when = new Intl.DateTimeFormat('en-GB', { timeZone: row.attendee_time_zone, dateStyle: 'full', timeStyle: 'short' }).format(row.start_at);
      const { rows, webhooksQueued } = await chatRepo.appendMessages(db, { id: session.id, chatInterfaceId: iface.id, ownerId: iface.owner_id, isNew: false }, [
        {
          role: 'assistant',
          content: `Booked: ${when} (${row.attendee_time_zone}). A calendar invitation is on its way to ${row.attendee_email}.`,
          toolCalls: [{ name: 'book_slot', arguments: { start: booking.start }, result: booking }],
        },
      ]);
      if (webhooksQueued > 0) ctx.deps.webhookJobs.notify();
      return { booking, message: chatRepo.toChatMessage(rows[0]!) };
    }),
});
