import type { Adapter, DatabaseSession, DatabaseUser } from 'lucia';
import type { Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';
import type { SessionCache } from './session-cache.ts';

/**
 * The sessions table as lucia 3's storage adapter (lucia calls these; nothing else writes sessions but the OIDC link).
 * Deletions also drop the session from this instance's cache directly: on PostgreSQL the change notification reaches
 * this instance asynchronously, after the sign-out has answered.
 */
export function createSessionRepository(db: Kysely<DB>, cache: Pick<SessionCache, 'forgetSession' | 'forgetOwner'>): Adapter {
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
      cache.forgetSession(sessionId);
    },
    async deleteUserSessions(userId) {
      await db.deleteFrom('sessions').where('owner_id', '=', userId).execute();
      cache.forgetOwner(userId);
    },
    async deleteExpiredSessions() {
      await db.deleteFrom('sessions').where('expires_at', '<=', new Date()).execute();
    },
  };
}
