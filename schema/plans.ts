import type { z } from 'zod';
import type { planSchema } from './owners.ts';

/** Per-file upload limits by plan, from the spec's Limits table. */
export const UPLOAD_LIMIT_BYTES: Record<z.infer<typeof planSchema>, number> = {
  free: 10 * 1024 * 1024,
  premium: 50 * 1024 * 1024,
  enterprise: 100 * 1024 * 1024,
};
