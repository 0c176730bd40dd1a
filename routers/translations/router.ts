import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { publicProcedure, router } from '../trpc.ts';
import { resolveCatalogue, SUPPORTED_LOCALES } from './catalogue.ts';

export const translationsRouter = router({
  get: publicProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/translations/{locale}',
        tags: ['Localization'],
        summary: 'UI translations for a locale, with fallback (pt-BR -> pt -> en)',
      },
    })
    .input(z.object({ locale: z.string().min(1).max(64) }))
    .output(
      z.object({
        requested: z.string(),
        locale: z.string(),
        fallbackChain: z.array(z.string()),
        messages: z.record(z.string(), z.string()),
      }),
    )
    .query(({ input }) => {
      const catalogue = resolveCatalogue(input.locale);
      if (!catalogue) throw new AppError('NOT_FOUND', 'Unknown locale', `Supported: ${SUPPORTED_LOCALES.join(', ')}`);
      return catalogue;
    }),
});
