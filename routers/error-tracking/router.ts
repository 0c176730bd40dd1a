import { z } from 'zod';
import { publicProcedure, router } from '../trpc.ts';

export class DeliberateError extends Error {
  override readonly name = 'DeliberateError';
}

export const errorTrackingRouter = router({
  example: publicProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/error-tracking-example-api',
        tags: ['Health'],
        summary: 'Raises a deliberate error to prove error reporting works (always 500)',
        errorResponses: { INTERNAL_ERROR: 'The deliberate error' },
      },
    })
    .input(z.object({}).optional())
    // It never succeeds: a `never` output leaves the document with no success response, only the 500.
    .output(z.never())
    .query(() => {
      throw new DeliberateError('Deliberate error raised by /api/v1/error-tracking-example-api');
    }),
});
