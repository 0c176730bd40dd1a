import { AppError } from '../../schema/errors.ts';
import { isUuid } from '../../schema/common.ts';
import type { AppDeps } from '../context.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import { OAuthError, platformClient, providerUrls, requestTokens } from './oauth.ts';
import * as repo from './repository.ts';
import type { Toolkit, ToolCredential } from './toolkit.ts';

type Deps = Pick<AppDeps, 'database' | 'secrets' | 'http' | 'config' | 'webhookJobs'>;

/** A token this close to its expiry is refreshed before use. */
const REFRESH_MARGIN_MS = 60_000;
/** How long one refresh may hold the account (a crashed holder's lease simply runs out). */
const LEASE_MS = 20_000;
const WAIT_STEP_MS = 100;

export const PLATFORM_PREFIX = 'platform:';

/** The OAuth client an account was authorised with: the owner's registration (sealed secret) or the platform's. */
export async function clientOf(deps: Pick<AppDeps, 'database' | 'secrets' | 'config'>, ownerId: string, authConfigId: string | null, toolkit: string) {
  if (!authConfigId) return undefined;
  // A client registered for one toolkit is never used for another.
  if (authConfigId.startsWith(PLATFORM_PREFIX)) return authConfigId === `${PLATFORM_PREFIX}${toolkit}` ? platformClient(deps.config, toolkit) : undefined;
  if (!isUuid(authConfigId)) return undefined;
  const row = await repo.findAuthConfig(deps.database.db, ownerId, authConfigId);
  return row && row.toolkit === toolkit
    ? { clientId: row.client_id, clientSecret: deps.secrets.open(row.client_secret_enc), scopes: row.scopes as string[] }
    : undefined;
}

export const expiredEvent = (account: repo.AccountRow, reason: string) =>
  webhookEvent(account.owner_id, 'toolhub_account.expired', { id: account.id, toolkit: account.toolkit, status: 'EXPIRED' as const, reason });

async function markExpired(deps: Deps, account: repo.AccountRow, reason: string) {
  await withEvents(
    deps,
    (trx) => repo.updateAccount(trx, account.id, { status: 'EXPIRED', status_reason: reason, last_error: reason, refresh_lease_until: null }),
    (row) => (row && account.status === 'ACTIVE' ? [expiredEvent(row, reason)] : []),
  );
}

const fresh = (account: repo.AccountRow) => !account.token_expires_at || account.token_expires_at.getTime() - REFRESH_MARGIN_MS > Date.now();

/**
 * The credential to call the provider with. An OAuth token near its expiry is refreshed first, by one request at
 * a time per account (a lease on the row, so two instances never both spend a rotating refresh token); the others
 * wait for it and read the new token. On `invalid_grant` the row is read again: if another holder rotated the
 * token meanwhile its result is used, otherwise the account is EXPIRED (and the owner's webhooks hear of it).
 */
export async function credentialFor(deps: Deps, toolkit: Toolkit, account: repo.AccountRow): Promise<ToolCredential> {
  if (account.status !== 'ACTIVE') throw new AppError('CONFLICT', 'Account not active', `The account is ${account.status}; activate it first`);
  if (toolkit.auth.scheme === 'none') return { kind: 'none' };
  if (toolkit.auth.scheme === 'api_key')
    return account.access_token_enc ? { kind: 'api_key', apiKey: deps.secrets.open(account.access_token_enc) } : { kind: 'none' };
  if (!account.access_token_enc) throw new AppError('CONFLICT', 'Account not connected', 'The account has no token; connect it again');
  if (fresh(account)) return { kind: 'oauth2', accessToken: deps.secrets.open(account.access_token_enc) };
  return { kind: 'oauth2', accessToken: await refreshed(deps, toolkit, account) };
}

async function refreshed(deps: Deps, toolkit: Toolkit, account: repo.AccountRow): Promise<string> {
  const db = deps.database.db;
  const deadline = Date.now() + LEASE_MS + 5_000;
  for (;;) {
    const leased = await repo.takeRefreshLease(db, account.id, LEASE_MS);
    if (leased) {
      try {
        return await refreshUnderLease(deps, toolkit, leased);
      } finally {
        await repo.updateAccount(db, account.id, { refresh_lease_until: null });
      }
    }
    // Someone else is refreshing: wait for their result rather than spend the refresh token twice.
    await new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS));
    const now = await repo.findAccountById(db, account.id);
    if (now?.status !== 'ACTIVE' || !now.access_token_enc) throw new AppError('CONFLICT', 'Account not active', now?.status_reason ?? 'The account is gone');
    if (fresh(now)) return deps.secrets.open(now.access_token_enc);
    if (Date.now() > deadline) throw new AppError('UPSTREAM_TIMEOUT', 'Token refresh timed out', 'Another refresh of this account did not finish in time');
  }
}

async function refreshUnderLease(deps: Deps, toolkit: Toolkit, account: repo.AccountRow): Promise<string> {
  // The holder before us may have refreshed already.
  if (fresh(account)) return deps.secrets.open(account.access_token_enc!);
  if (!account.refresh_token_enc) {
    await markExpired(deps, account, 'The access token expired and the provider gave no refresh token');
    throw new AppError('CONFLICT', 'Account expired', 'Connect the account again');
  }
  const client = await clientOf(deps, account.owner_id, account.auth_config_id, account.toolkit);
  if (!client) {
    await markExpired(deps, account, 'Its OAuth client registration was deleted');
    throw new AppError('CONFLICT', 'Account expired', 'Its auth config is gone; connect the account again');
  }
  const usedRefreshToken = account.refresh_token_enc;
  try {
    const tokens = await requestTokens(deps, providerUrls(deps.config, toolkit).tokenUrl, {
      grant_type: 'refresh_token',
      refresh_token: deps.secrets.open(usedRefreshToken),
      client_id: client.clientId,
      client_secret: client.clientSecret,
    });
    await repo.updateAccount(deps.database.db, account.id, {
      access_token_enc: deps.secrets.seal(tokens.accessToken),
      // Rotation: a new refresh token replaces the old one, which the provider no longer accepts.
      ...(tokens.refreshToken ? { refresh_token_enc: deps.secrets.seal(tokens.refreshToken) } : {}),
      token_expires_at: tokens.expiresAt,
      ...(tokens.scopes ? { scopes: tokens.scopes } : {}),
      last_refresh_at: new Date(),
      last_error: null,
    });
    return tokens.accessToken;
  } catch (error) {
    if (error instanceof OAuthError && error.code === 'invalid_grant') {
      const now = await repo.findAccountById(deps.database.db, account.id);
      if (now?.access_token_enc && now.refresh_token_enc !== usedRefreshToken && fresh(now)) return deps.secrets.open(now.access_token_enc);
      await markExpired(deps, account, 'The provider no longer accepts the refresh token (invalid_grant); connect the account again');
      throw new AppError('CONFLICT', 'Account expired', 'The provider revoked the connection; connect the account again');
    }
    // Only our wording and the provider's error code: its free-text description can reach a visitor's toolCalls.
    const reason = error instanceof OAuthError ? `The token refresh was refused (${error.code})` : 'The token refresh failed';
    await repo.updateAccount(deps.database.db, account.id, { last_error: reason });
    throw new AppError('UPSTREAM_ERROR', 'Token refresh failed', reason);
  }
}
