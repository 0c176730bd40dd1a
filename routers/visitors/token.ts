import type { SecretBox } from '../../adapters/outbound/secrets.ts';

/**
 * Visitor tokens: `vis_<payload>.<tag>`, the payload naming the visitor, the one chat interface it may talk to
 * and the expiry, the tag an HMAC under a key derived for this purpose alone. They are short-lived bearer
 * tokens the hosted page keeps in memory and sends in the Authorization header (never in a URL or a cookie);
 * the long-lived secret is the resume token, stored hashed, which only mints new visitor tokens.
 */
export const VISITOR_TOKEN_PREFIX = 'vis_';
const PURPOSE = 'visitor-token-v1';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface VisitorClaims {
  visitorId: string;
  chatInterfaceId: string;
  /** Unix milliseconds. */
  expiresAt: number;
}

export function issueVisitorToken(secrets: Pick<SecretBox, 'sign'>, claims: VisitorClaims): string {
  const payload = Buffer.from(`${claims.visitorId}.${claims.chatInterfaceId}.${Math.floor(claims.expiresAt / 1000)}`).toString('base64url');
  return `${VISITOR_TOKEN_PREFIX}${payload}.${secrets.sign(PURPOSE, payload)}`;
}

/** The claims of a genuine, unexpired token; null for anything else. */
export function readVisitorToken(secrets: Pick<SecretBox, 'verify'>, token: string, now: number): VisitorClaims | null {
  if (token.length > 300) return null;
  const [payload, tag, extra] = token.slice(VISITOR_TOKEN_PREFIX.length).split('.');
  if (!payload || !tag || extra !== undefined || !secrets.verify(PURPOSE, payload, tag)) return null;
  const [visitorId, chatInterfaceId, expires] = Buffer.from(payload, 'base64url').toString('utf8').split('.');
  if (!visitorId || !chatInterfaceId || !UUID.test(visitorId) || !UUID.test(chatInterfaceId) || !/^\d{1,12}$/.test(expires ?? '')) return null;
  const expiresAt = Number(expires) * 1000;
  if (expiresAt <= now) return null;
  return { visitorId, chatInterfaceId, expiresAt };
}
