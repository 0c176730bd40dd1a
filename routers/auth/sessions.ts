import { randomBytes } from 'node:crypto';
import { Lucia, TimeSpan, type Adapter, type DatabaseSession, type DatabaseUser } from 'lucia';
import type { Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';
import { sha256Hex } from './caller.ts';

/**
 * Sessions are lucia 3 sessions behind this one module (lucia is deprecated upstream; swapping it touches
 * only this file). The client holds a random token; the session id stored is its SHA-256, so a database
 * leak yields no usable bearer tokens.
 */
export function createSessionManager(db: Kysely<DB>, ttlDays: number): Lucia {
  return new Lucia(createKyselyAdapter(db), {
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

function createKyselyAdapter(db: Kysely<DB>): Adapter {
  const toSession = (row: { id: string; owner_id: string; expires_at: Date }): DatabaseSession => ({
    id: row.id,
    userId: row.owner_id,
    expiresAt: new Date(row.expires_at),
    attributes: {},
  });
  return {
    async getSessionAndUser(sessionId) {
      const row = await db
        .selectFrom('sessions')
        .innerJoin('owners', 'owners.id', 'sessions.owner_id')
        .select(['sessions.id', 'sessions.owner_id', 'sessions.expires_at', 'owners.email', 'owners.name', 'owners.plan', 'owners.role'])
        .where('sessions.id', '=', sessionId)
        .executeTakeFirst();
      if (!row) return [null, null];
      const user: DatabaseUser = {
        id: row.owner_id,
        attributes: { email: row.email, name: row.name, plan: row.plan, role: row.role } as never,
      };
      return [toSession(row), user];
    },
    async getUserSessions(userId) {
      const rows = await db.selectFrom('sessions').selectAll().where('owner_id', '=', userId).execute();
      return rows.map(toSession);
    },
    async setSession(session) {
      await db.insertInto('sessions').values({ id: session.id, owner_id: session.userId, expires_at: session.expiresAt }).execute();
    },
    async updateSessionExpiration(sessionId, expiresAt) {
      await db.updateTable('sessions').set({ expires_at: expiresAt }).where('id', '=', sessionId).execute();
    },
    async deleteSession(sessionId) {
      await db.deleteFrom('sessions').where('id', '=', sessionId).execute();
    },
    async deleteUserSessions(userId) {
      await db.deleteFrom('sessions').where('owner_id', '=', userId).execute();
    },
    async deleteExpiredSessions() {
      await db.deleteFrom('sessions').where('expires_at', '<=', new Date()).execute();
    },
  };
}
