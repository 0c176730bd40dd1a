import { randomBytes } from 'node:crypto';
import { Lucia, TimeSpan } from 'lucia';
import type { Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';
import { sha256Hex } from '../../adapters/outbound/secrets.ts';
import { createSessionRepository } from './session-repository.ts';
import type { SessionCache } from './session-cache.ts';

/**
 * Sessions are lucia 3 sessions behind this one module (lucia is deprecated upstream; swapping it touches
 * only this file and its storage adapter, session-repository.ts). The client holds a random token; the session id stored is its SHA-256, so a database
 * leak yields no usable bearer tokens.
 */
export function createSessionManager(db: Kysely<DB>, ttlDays: number, cache: SessionCache): Lucia {
  return new Lucia(createSessionRepository(db, cache), {
    sessionExpiresIn: new TimeSpan(ttlDays, 'd'),
    // The owner's plan and role ride along with the session lookup (one query per request).
    getUserAttributes: (attributes) => attributes,
  }) as unknown as Lucia;
}

export async function issueSessionToken(sessions: Lucia, ownerId: string): Promise<string> {
  const token = randomBytes(32).toString('base64url');
  await sessions.createSession(ownerId, {}, { sessionId: sha256Hex(token) });
  return token;
}
