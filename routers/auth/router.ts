import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { authResultSchema, ownerDetailSchema, signInInput, signUpInput } from '../../schema/owners.ts';
import { ownerProcedure, publicProcedure, router } from '../trpc.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { DUMMY_HASH_PROMISE, hashPassword, verifyPassword } from './passwords.ts';
import { issueSessionToken } from './sessions.ts';
import { findOwnerByEmail, findOwnerById, insertOwner, toOwner, toOwnerDetail } from './repository.ts';

const tags = ['Authentication'];
const invalidCredentials = () => new AppError('UNAUTHORIZED', 'Invalid email or password');

export const authRouter = router({
  signUp: publicProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/auth/sign-up',
        tags,
        summary: 'Create an owner account and a session',
        errorResponses: { CONFLICT: 'An account with this email already exists' },
      },
      successStatus: 201,
    })
    .input(signUpInput)
    .output(authResultSchema)
    .mutation(async ({ ctx, input }) => {
      const email = input.email.toLowerCase();
      const { db } = ctx.deps.database;
      const role = ctx.deps.config.ADMIN_EMAILS.includes(email) ? 'admin' : 'owner';
      try {
        const row = await insertOwner(db, { id: randomUUID(), email, name: input.name ?? null, password_hash: await hashPassword(input.password), role });
        return { token: await issueSessionToken(ctx.deps.sessions, row.id), owner: toOwner(row) };
      } catch (error) {
        if (isUniqueViolation(error)) throw new AppError('CONFLICT', 'An account with this email already exists', 'email');
        throw error;
      }
    }),

  signIn: publicProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/auth/sign-in',
        tags,
        summary: 'Sign in with email and password; returns a session token',
        errorResponses: { UNAUTHORIZED: 'Wrong email or password' },
      },
    })
    .input(signInInput)
    .output(authResultSchema)
    .mutation(async ({ ctx, input }) => {
      const row = await findOwnerByEmail(ctx.deps.database.db, input.email.toLowerCase());
      // Verify against a dummy hash when the account is unknown so timing does not reveal which emails exist.
      const ok = await verifyPassword(input.password, row?.password_hash ?? (await DUMMY_HASH_PROMISE));
      if (!row?.password_hash || !ok) {
        // The email's domain only: the address itself is personal data, and the password is never kept.
        ctx.deps.securityEvents.record('sign_in_failed', {
          ownerId: row?.id,
          ip: ctx.clientIp,
          detail: { emailDomain: input.email.split('@').at(-1)!.toLowerCase() },
        });
        throw invalidCredentials();
      }
      return { token: await issueSessionToken(ctx.deps.sessions, row.id), owner: toOwner(row) };
    }),

  signOut: ownerProcedure
    .meta({ openapi: { method: 'POST', path: '/api/v1/auth/sign-out', tags, summary: 'Invalidate the current session', protect: true } })
    .input(z.object({}).optional())
    .output(z.object({ signedOut: z.literal(true) }))
    .mutation(async ({ ctx }) => {
      await ctx.deps.sessions.invalidateSession(ctx.sessionId);
      return { signedOut: true as const };
    }),

  me: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/auth/me', tags, summary: 'The signed-in owner', protect: true } })
    .input(z.object({}).optional())
    .output(z.object({ owner: ownerDetailSchema }))
    .query(async ({ ctx }) => {
      const row = await findOwnerById(ctx.deps.database.db, ctx.owner.id);
      if (!row) throw new AppError('UNAUTHORIZED', 'Invalid or expired credentials');
      return { owner: toOwnerDetail(row) };
    }),
});
