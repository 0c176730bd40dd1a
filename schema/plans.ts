import type { z } from 'zod';
import type { planSchema } from './owners.ts';

type Plan = z.infer<typeof planSchema>;

/**
 * What each plan gives, in one place: every rule that depends on the plan reads it from here (the upload cap in
 * the REST adapter, the enterprise-only routes, GET /api/v1/user/subscription). Upload limits are the spec's
 * Limits table. The trial's length is configuration (TRIAL_DAYS).
 */
export const PLAN_RULES: Record<Plan, { uploadBytes: number; enterpriseWebhooks: boolean }> = {
  free: { uploadBytes: 10 * 1024 * 1024, enterpriseWebhooks: false },
  premium: { uploadBytes: 50 * 1024 * 1024, enterpriseWebhooks: false },
  enterprise: { uploadBytes: 100 * 1024 * 1024, enterpriseWebhooks: true },
};
