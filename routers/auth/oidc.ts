/**
 * Optional OpenID Connect login: when OIDC_ISSUER is set, an ID token of that provider is accepted as an
 * owner bearer token (see resolveCaller). Keys come from the provider's JWKS, fetched through deps.http
 * (the SSRF-guarded client) and cached; nothing here ever turns a bad token or an unreachable provider
 * into anything but an anonymous 'invalid' caller.
 */
import { randomUUID } from 'node:crypto';
import { sha256Hex } from '../../adapters/outbound/secrets.ts';
import {
  createLocalJWKSet,
  errors as joseErrors,
  jwtVerify,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type JWTHeaderParameters,
  type JWTPayload,
} from 'jose';
import type { OwnerRow } from '../../db/types.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { AppDeps } from '../context.ts';
import { findIllFormedText, toStorable } from '../../schema/text-input.ts';
import type { Caller, OwnerPrincipal } from './principal.ts';
import { findOwnerByEmail, findOwnerByOidcSubject, insertOidcOwner, linkOidcSubject } from './repository.ts';

/** Asymmetric algorithms only: never 'none', never HS* (the JWKS is public, a shared secret would be too). */
export const OIDC_ALGORITHMS = ['RS256', 'ES256', 'PS256', 'EdDSA'];
const CLOCK_TOLERANCE_SECONDS = 30;
/** Keys are refetched after this even when every kid is known. */
const JWKS_TTL_MS = 10 * 60_000;
/** Minimum gap between two fetches (unknown kid, or retry after a failure). */
const JWKS_COOLDOWN_MS = 30_000;
const FETCH_TIMEOUT_MS = 5_000;
const MAX_JWKS_BYTES = 256 * 1024;
const MAX_TOKEN_LENGTH = 16 * 1024;
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** Three base64url parts separated by dots (the signature may be empty, so alg 'none' gets refused here too). Session tokens have no dots. */
export function looksLikeJwt(token: string): boolean {
  return token.length <= MAX_TOKEN_LENGTH && JWT_SHAPE.test(token);
}

type KeyResolver = ReturnType<typeof createLocalJWKSet>;
/** One object per running app: the key cache is kept per deps object. */
type OidcDeps = Pick<AppDeps, 'apiKeyCache' | 'apiKeyListCache' | 'config' | 'database' | 'http' | 'logger' | 'sessionCache'>;

/** Whether `since` is less than `ms` ago; a clock that jumped backwards counts as expired rather than blocking fetches. */
function within(since: number, ms: number): boolean {
  const elapsed = Date.now() - since;
  return elapsed >= 0 && elapsed < ms;
}

/** One provider's keys: cached, refetched after the TTL, or early (once per cooldown) when a token names an unknown kid. */
class JwksCache {
  private keys: KeyResolver | undefined;
  private fetchedAt = 0;
  private lastAttemptAt = Number.NEGATIVE_INFINITY;
  private inflight: Promise<void> | undefined;
  private jwksUrl: string | undefined;

  constructor(private readonly deps: OidcDeps) {
    this.jwksUrl = deps.config.OIDC_JWKS_URL;
  }

  /** Key resolver for jwtVerify. */
  readonly getKey = async (header: JWTHeaderParameters, token: FlattenedJWSInput) => {
    if (!this.keys || !within(this.fetchedAt, JWKS_TTL_MS)) await this.refresh();
    if (!this.keys) throw new joseErrors.JWKSNoMatchingKey('no OIDC signing keys available');
    try {
      return await this.keys(header, token);
    } catch (error) {
      // Key rotation: the provider may have published a key we have not seen yet.
      if (!(error instanceof joseErrors.JWKSNoMatchingKey) || !this.mayFetch()) throw error;
      await this.refresh();
      return await this.keys(header, token);
    }
  };

  private mayFetch(): boolean {
    return !within(this.lastAttemptAt, JWKS_COOLDOWN_MS);
  }

  /** Single-flight; a failure keeps the previous keys (if any) and is retried after the cooldown. */
  private refresh(): Promise<void> {
    if (!this.inflight && this.mayFetch()) {
      this.lastAttemptAt = Date.now();
      this.inflight = this.load()
        .then((keys) => {
          this.keys = keys;
          this.fetchedAt = Date.now();
        })
        .catch((error: unknown) => {
          // Rediscover next time: the provider may have moved its jwks_uri.
          if (!this.deps.config.OIDC_JWKS_URL) this.jwksUrl = undefined;
          this.deps.logger.warn('oidc: could not fetch the provider keys', {
            error: error instanceof Error ? error.message : String(error),
            staleKeysKept: this.keys !== undefined,
          });
        })
        .finally(() => {
          this.inflight = undefined;
        });
    }
    return this.inflight ?? Promise.resolve();
  }

  private async load(): Promise<KeyResolver> {
    this.jwksUrl ??= await this.discover();
    const jwks = await this.getJson(this.jwksUrl);
    if (!isJwks(jwks)) throw new Error('JWKS response has no "keys" array');
    return createLocalJWKSet(jwks);
  }

  private async discover(): Promise<string> {
    const issuer = this.deps.config.OIDC_ISSUER!.replace(/\/+$/, '');
    const doc = await this.getJson(`${issuer}/.well-known/openid-configuration`);
    const uri = (doc as { jwks_uri?: unknown } | null)?.jwks_uri;
    if (typeof uri !== 'string' || uri === '') throw new Error('discovery document has no jwks_uri');
    return uri;
  }

  private async getJson(url: string): Promise<unknown> {
    const res = await this.deps.http.request(url, {
      timeoutMs: FETCH_TIMEOUT_MS,
      maxResponseBytes: MAX_JWKS_BYTES,
      headers: { accept: 'application/json' },
    });
    if (res.status !== 200) throw new Error(`${new URL(url).origin} answered HTTP ${res.status}`);
    return res.json();
  }
}

function isJwks(value: unknown): value is JSONWebKeySet {
  return typeof value === 'object' && value !== null && Array.isArray((value as { keys?: unknown }).keys);
}

// One cache per running app (tests start several apps in one process).
const caches = new WeakMap<OidcDeps, JwksCache>();
function cacheFor(deps: OidcDeps): JwksCache {
  let cache = caches.get(deps);
  if (!cache) caches.set(deps, (cache = new JwksCache(deps)));
  return cache;
}

const invalid: Caller = { kind: 'anonymous', reason: 'invalid' };

/** Verifies an ID token of OIDC_ISSUER and maps it to an owner. Only call when OIDC_ISSUER is set. */
export async function resolveOidcCaller(deps: OidcDeps, token: string): Promise<Caller> {
  const { OIDC_ISSUER: issuer, OIDC_AUDIENCE: audience } = deps.config;
  if (!issuer) return invalid;

  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, cacheFor(deps).getKey, {
      issuer,
      ...(audience ? { audience } : {}),
      algorithms: OIDC_ALGORITHMS,
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
      requiredClaims: ['sub', 'exp'],
    }));
  } catch (error) {
    deps.logger.debug('oidc: token refused', { code: (error as { code?: unknown } | null)?.code ?? 'unknown' });
    return invalid;
  }
  // The subject is looked up and stored as text: NUL or half a surrogate pair would be refused by the database, as a 500.
  if (typeof payload.sub !== 'string' || payload.sub === '' || findIllFormedText(payload.sub) !== null) return invalid;

  const owner = await findOrLinkOwner(deps, `${issuer}#${payload.sub}`, payload);
  if (!owner) return invalid;
  const jti = typeof payload.jti === 'string' && payload.jti !== '' && payload.jti.length <= 200 ? payload.jti : sha256Hex(token);
  // Not a stored session: sign-out's invalidateSession(sessionId) deletes nothing; the token lives until exp.
  return { kind: 'owner', owner: toPrincipal(owner), sessionId: `oidc:${jti}` };
}

/** By oidc_subject; else by verified email (link the existing owner, or create one). Retries once on a concurrent first sign-in. */
async function findOrLinkOwner(deps: OidcDeps, subject: string, claims: JWTPayload, retry = true): Promise<OwnerRow | undefined> {
  const { db } = deps.database;
  const linked = await findOwnerByOidcSubject(db, subject);
  if (linked) return linked;

  const email = typeof claims.email === 'string' ? claims.email.trim().toLowerCase() : '';
  if (claims.email_verified !== true || email === '' || email.length > 254 || !email.includes('@') || findIllFormedText(email) !== null) return undefined;

  const existing = await findOwnerByEmail(db, email);
  if (existing) {
    if (existing.oidc_subject !== null) {
      // Already linked to another subject of the provider: never move an account between subjects.
      deps.logger.warn('oidc: email already linked to another subject', { ownerId: existing.id });
      return undefined;
    }
    const updated = await linkOidcSubject(db, existing.id, subject);
    // Its password sessions were just deleted and its keys deactivated: this instance must not serve them while the
    // notifications travel.
    deps.sessionCache.forgetOwner(existing.id);
    deps.apiKeyCache.invalidate();
    deps.apiKeyListCache.forget(existing.id);
    if (updated) deps.logger.info('oidc: linked owner to provider subject', { ownerId: existing.id });
    return updated ?? (retry ? findOrLinkOwner(deps, subject, claims, false) : undefined);
  }

  try {
    const row = await insertOidcOwner(db, {
      id: randomUUID(),
      email,
      name: nameFrom(claims.name),
      oidc_subject: subject,
      role: deps.config.ADMIN_EMAILS.includes(email) ? 'admin' : 'owner',
    });
    deps.logger.info('oidc: created owner', { ownerId: row.id });
    return row;
  } catch (error) {
    if (retry && isUniqueViolation(error)) return findOrLinkOwner(deps, subject, claims, false);
    throw error;
  }
}

function nameFrom(claim: unknown): string | null {
  if (typeof claim !== 'string') return null;
  // A display name is cleaned rather than refused (the provider chose it, not the user signing in), and cut
  // before cleaning so that a pair split at the cut becomes U+FFFD.
  const name = toStorable(claim.trim().slice(0, 100));
  return name === '' ? null : name;
}

const toPrincipal = (row: OwnerRow): OwnerPrincipal => ({ id: row.id, email: row.email, name: row.name, plan: row.plan, role: row.role });
