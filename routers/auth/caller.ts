import { AppError } from '../../schema/errors.ts';
import type { AppDeps } from '../context.ts';
import { sha256Hex } from '../../adapters/outbound/secrets.ts';
import { parseApiKey } from '../api-keys/key-format.ts';
import { findActiveKeyByHash, findKeyOwnerByHash, touchKeyLastUsed } from '../api-keys/repository.ts';
import { looksLikeJwt, resolveOidcCaller } from './oidc.ts';
import type { Caller, OwnerPrincipal } from './principal.ts';
import type { ValidSession } from './session-cache.ts';
import { readVisitorToken, VISITOR_TOKEN_PREFIX } from '../visitors/token.ts';

/** The token of `Authorization: Bearer <token>` (the scheme in any case, as RFC 9110 has it), or undefined. */
export function bearerToken(authorization: string | undefined): string | undefined {
  return /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];
}

/** A key in a security event: its first 8 characters, never more. */
const keyHint = (token: string) => token.slice(0, 8);

/**
 * A well-formed key that is not active: revoked when its row is still there (deactivated), unknown otherwise (made
 * up, or deleted: its row is gone). One indexed lookup, on the refusal path only.
 */
async function noteRefusedKey(deps: Pick<AppDeps, 'database' | 'securityEvents'>, token: string, keyHash: string, ip: string | undefined) {
  const known = await findKeyOwnerByHash(deps.database.db, keyHash).catch(() => undefined);
  deps.securityEvents.record(known ? 'api_key_revoked' : 'api_key_invalid', {
    ownerId: known?.owner_id,
    chatInterfaceId: known?.chat_interface_id,
    ip,
    detail: { key: keyHint(token) },
  });
}

/**
 * Turns an Authorization header into a caller. Never throws for bad credentials: it returns an
 * anonymous caller and the procedure's auth rule answers 401, so rate limiting can still key on IP.
 */
export async function resolveCaller(
  deps: Pick<
    AppDeps,
    'apiKeyCache' | 'apiKeyListCache' | 'config' | 'database' | 'sessions' | 'sessionCache' | 'http' | 'logger' | 'secrets' | 'securityEvents'
  >,
  authorization: string | undefined,
  clientIp?: string,
): Promise<Caller> {
  if (!authorization) return { kind: 'anonymous', reason: 'missing' };
  const token = bearerToken(authorization);
  if (!token) return { kind: 'anonymous', reason: 'invalid' };

  if (token.startsWith('svc_')) {
    // A bad checksum is refused here, without a database lookup.
    if (!parseApiKey(token)) {
      deps.securityEvents.record('api_key_invalid', { ip: clientIp, detail: { key: keyHint(token), malformed: true } });
      return { kind: 'anonymous', reason: 'invalid' };
    }
    const keyHash = sha256Hex(token);
    const key = await deps.apiKeyCache.lookup(keyHash, () => findActiveKeyByHash(deps.database.db, keyHash));
    if (!key) {
      await noteRefusedKey(deps, token, keyHash, clientIp);
      return { kind: 'anonymous', reason: 'invalid' };
    }
    const touchedAt = await touchKeyLastUsed(deps.database.db, key.id, key.last_used_at);
    // A cached key remembers the touch, so it is written at most once a minute per instance.
    if (touchedAt) {
      key.last_used_at = touchedAt;
      deps.apiKeyListCache.forget(key.owner_id);
    }
    return {
      kind: 'apiKey',
      keyId: key.id,
      ownerId: key.owner_id,
      chatInterfaceId: key.chat_interface_id,
      chatInterface: {
        id: key.chat_interface_id,
        owner_id: key.owner_id,
        slug: key.slug,
        config_id: key.config_id,
        endpoint_url: key.endpoint_url,
        endpoint_type: key.endpoint_type,
        endpoint_api_key_enc: key.endpoint_api_key_enc,
      },
    };
  }

  if (token.startsWith(VISITOR_TOKEN_PREFIX)) {
    // Signed, not stored: checked without a database round trip; what it names is checked by the procedure.
    const claims = readVisitorToken(deps.secrets, token, Date.now());
    if (!claims) return { kind: 'anonymous', reason: 'invalid' };
    return { kind: 'visitor', visitorId: claims.visitorId, chatInterfaceId: claims.chatInterfaceId };
  }

  // Optional OIDC: ID tokens are JWTs (dotted); session tokens are 43 base64url characters without dots.
  if (deps.config.OIDC_ISSUER && looksLikeJwt(token)) return resolveOidcCaller(deps, token);

  if (token.length < 20 || token.length > 256) return { kind: 'anonymous', reason: 'invalid' };
  const sessionId = sha256Hex(token);
  const valid = await deps.sessionCache.lookup(sessionId, () => validateSession(deps.sessions, sessionId));
  if (!valid) return { kind: 'anonymous', reason: 'invalid' };
  return { kind: 'owner', owner: valid.owner, sessionId: valid.sessionId };
}

/** lucia's check (which also deletes an expired session and extends a half-used one), as the session cache stores it. */
async function validateSession(sessions: AppDeps['sessions'], sessionId: string): Promise<ValidSession | undefined> {
  const { session, user } = await sessions.validateSession(sessionId);
  if (!session || !user) return undefined;
  const { id, email, name, plan, role } = user as unknown as OwnerPrincipal;
  // Shared by every request the entry serves: frozen, so no procedure can change what the next one sees.
  return { sessionId: session.id, expiresAt: session.expiresAt.getTime(), owner: Object.freeze({ id, email, name, plan, role }) };
}

export function unauthorized(caller: Caller): AppError {
  return new AppError(
    'UNAUTHORIZED',
    caller.kind === 'anonymous' && caller.reason === 'missing' ? 'Authentication required' : 'Invalid or expired credentials',
    'Send Authorization: Bearer <session token, API key or visitor token>',
  );
}
