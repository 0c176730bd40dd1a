import { createHash, randomBytes } from 'node:crypto';
import type { Config } from '../../schema/config.ts';
import type { AppDeps } from '../context.ts';
import type { OAuth2Scheme, Toolkit } from './toolkit.ts';
import { identifier } from './toolkits/provider-kit.ts';

/** The URLs a toolkit is reached at: its defaults, or the operator's overrides (TOOLHUB_PROVIDER_URLS). */
export function providerUrls(config: Pick<Config, 'TOOLHUB_PROVIDER_URLS'>, toolkit: Toolkit) {
  const overrides = new Map(
    config.TOOLHUB_PROVIDER_URLS.map((entry) => {
      const at = entry.indexOf('=');
      return [entry.slice(0, at), entry.slice(at + 1)] as const;
    }),
  );
  const oauth = toolkit.auth.scheme === 'oauth2' ? toolkit.auth : undefined;
  return {
    authorizeUrl: overrides.get(`${toolkit.slug}.authorize`) ?? oauth?.authorizeUrl ?? '',
    tokenUrl: overrides.get(`${toolkit.slug}.token`) ?? oauth?.tokenUrl ?? '',
    apiBaseUrl: overrides.get(`${toolkit.slug}.api`) ?? toolkit.apiBaseUrl,
  };
}

/** The platform's registered client for a toolkit (TOOLHUB_PLATFORM_CLIENTS `slug=id:secret`), if any. */
export function platformClient(config: Pick<Config, 'TOOLHUB_PLATFORM_CLIENTS'>, toolkit: string) {
  for (const entry of config.TOOLHUB_PLATFORM_CLIENTS) {
    const [slug, credentials = ''] = entry.split('=', 2);
    const colon = credentials.indexOf(':');
    if (slug === toolkit && colon > 0) return { clientId: credentials.slice(0, colon), clientSecret: credentials.slice(colon + 1) };
  }
  return undefined;
}

export const randomToken = () => randomBytes(32).toString('base64url');
export const sha256 = (text: string) => createHash('sha256').update(text).digest('base64url');

/** RFC 7636: a 43-character verifier and its S256 challenge. */
export function pkcePair() {
  const verifier = randomToken();
  return { verifier, challenge: sha256(verifier) };
}

export function authorizeUrl(
  scheme: OAuth2Scheme,
  url: string,
  params: { clientId: string; redirectUri: string; state: string; challenge: string; scopes: string[] },
) {
  const target = new URL(url);
  target.searchParams.set('response_type', 'code');
  target.searchParams.set('client_id', params.clientId);
  target.searchParams.set('redirect_uri', params.redirectUri);
  target.searchParams.set('scope', params.scopes.join(scheme.scopeSeparator));
  target.searchParams.set('state', params.state);
  target.searchParams.set('code_challenge', params.challenge);
  target.searchParams.set('code_challenge_method', 'S256');
  // Google issues a refresh token only for offline access with consent.
  if (target.hostname === 'accounts.google.com') {
    target.searchParams.set('access_type', 'offline');
    target.searchParams.set('prompt', 'consent');
  }
  return target.href;
}

export interface TokenSet {
  accessToken: string;
  refreshToken: string | null;
  expiresAt: Date | null;
  scopes: string[] | null;
}

/** An error answer of a token endpoint: `invalid_grant` means the refresh token is dead (or already rotated). */
export class OAuthError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'OAuthError';
  }
}

/**
 * A token-endpoint call (RFC 6749 §4.1.3 and §6) through the guarded client, client credentials in the body.
 * Slack answers 200 with `{ok: false, error}`; everyone else a 4xx with `{error}`. The provider's description is
 * kept to a short code-and-sentence: never its raw body.
 */
export async function requestTokens(deps: Pick<AppDeps, 'http' | 'config'>, tokenUrl: string, params: Record<string, string>): Promise<TokenSet> {
  const response = await deps.http.request(tokenUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams(params).toString(),
    timeoutMs: Math.min(deps.config.OUTBOUND_TIMEOUT_MS, 15_000),
    maxResponseBytes: 64 * 1024,
  });
  let body: Record<string, unknown>;
  try {
    body = response.json() as Record<string, unknown>;
  } catch {
    throw new OAuthError('invalid_response', `The token endpoint answered ${response.status} without JSON`);
  }
  const error = typeof body.error === 'string' ? body.error : body.ok === false ? 'unknown_error' : null;
  if (error || response.status >= 400 || typeof body.access_token !== 'string') {
    // The code travels further than the description (a token refresh's failure reaches a visitor's toolCalls), so it
    // must be an identifier: anything else in the provider's `error` field is free text and is not passed on.
    const code = error === null ? `http_${response.status}` : (identifier(error) ?? 'unknown_error');
    const description = typeof body.error_description === 'string' ? `: ${body.error_description.slice(0, 200)}` : '';
    throw new OAuthError(code, `The provider refused the token request (${code}${description})`);
  }
  const expiresIn = Number(body.expires_in);
  return {
    accessToken: body.access_token,
    refreshToken: typeof body.refresh_token === 'string' ? body.refresh_token : null,
    expiresAt: Number.isFinite(expiresIn) && expiresIn > 0 ? new Date(Date.now() + expiresIn * 1000) : null,
    scopes: typeof body.scope === 'string' ? body.scope.split(/[ ,]+/).filter(Boolean) : null,
  };
}
