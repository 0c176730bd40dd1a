import { z } from 'zod';
import { lookupId, timestamp } from './common.ts';

export const planSchema = z.enum(['free', 'premium', 'enterprise']);
export const roleSchema = z.enum(['owner', 'admin']);

export const ownerSchema = z
  .object({
    id: z.string(),
    email: z.string(),
    name: z.string().nullable(),
    plan: planSchema,
    role: roleSchema,
  })
  .meta({ id: 'Owner' });

export const ownerDetailSchema = ownerSchema.extend({ tourCompletedAt: timestamp.nullable(), createdAt: timestamp }).meta({ id: 'OwnerDetail' });

export const signUpInput = z.object({
  email: z.email().max(254),
  password: z.string().min(8, 'must be at least 8 characters').max(200),
  name: z.string().trim().min(1).max(100).optional(),
});
export const signInInput = z.object({ email: z.string().min(1).max(254), password: z.string().min(1).max(200) });
export const authResultSchema = z.object({ token: z.string(), owner: ownerSchema }).meta({ id: 'AuthResult' });

export const updateOwnerInput = z
  .object({ id: z.string().transform(lookupId), plan: planSchema.optional(), role: roleSchema.optional() })
  .refine((v) => v.plan !== undefined || v.role !== undefined, { message: 'give plan or role', path: ['plan'] });
