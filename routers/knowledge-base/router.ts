import { router } from '../trpc.ts';
import { kbConfigsRouter } from './configs-router.ts';
import { kbDocumentsRouter } from './documents-router.ts';
import { kbQueryRouter } from './query-router.ts';

export const knowledgeBaseRouter = router({
  configs: kbConfigsRouter,
  documents: kbDocumentsRouter,
  ask: kbQueryRouter,
});
