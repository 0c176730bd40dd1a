import { randomUUID } from 'node:crypto';
import { AppError } from '../../schema/errors.ts';
import { toStorable } from '../../schema/text-input.ts';
import type { AppDeps } from '../context.ts';
import { authorizeUrl, OAuthError, pkcePair, providerUrls, randomToken, requestTokens, sha256 } from './oauth.ts';
import * as repo from './repository.ts';
import { checkSettings } from './schemas.ts';
import { clientOf, credentialFor, PLATFORM_PREFIX } from './tokens.ts';
import { findToolkit } from './toolkits/catalogue.ts';
import { identifier, isObject } from './toolkits/provider-kit.ts';
import type { Toolkit } from './toolkit.ts';

type Deps = Pick<AppDeps, 'database' | 'secrets' | 'http' | 'config' | 'webhookJobs'>;

/** How long an authorization may take between connect and the provider's redirect to our callback. */
export const STATE_TTL_MS = 10 * 60_000;
const CHECK_TIMEOUT_MS = 10_000;

export function toAccount(row: repo.AccountRow) {
  return {
    id: row.id,
    toolkit: row.toolkit,
    authConfigId: row.auth_config_id,
    label: row.label,
    status: row.status,
    statusReason: row.status_reason,
    identity: row.identity,
    scopes: Array.isArray(row.scopes) ? (row.scopes as string[]) : [],
    settings: isObject(row.settings) ? row.settings : {},
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

export function knownToolkit(slug: string): Toolkit {
  const toolkit = findToolkit(slug);
  if (!toolkit) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `toolkit: unknown toolkit ${slug.slice(0, 50)}`);
  return toolkit;
}

export interface ConnectRequest {
  ownerId: string;
  toolkit: Toolkit;
  authConfigId?: string | undefined;
  apiKey?: string | undefined;
  label?: string | undefined;
  settings: Record<string, unknown>;
  scopes?: string[] | undefined;
  /** Where the provider sends the owner back (our callback, on the service's public origin). */
  redirectUri: string | null;
}

/**
 * OAuth 2: an INITIATED account and the authorization URL (code flow, PKCE S256, a single-use state bound to the
 * owner and the account, stored hashed with the sealed verifier). API key: the key is tried with the toolkit's
 * test call first, and only a working key is stored (sealed), ACTIVE.
 */
export async function connect(deps: Deps, request: ConnectRequest) {
  const { toolkit } = request;
  const db = deps.database.db;
  checkSettings(toolkit, request.settings);
  const id = randomUUID();
  if (toolkit.auth.scheme !== 'oauth2') {
    const credential = request.apiKey ? ({ kind: 'api_key', apiKey: request.apiKey } as const) : ({ kind: 'none' } as const);
    if (toolkit.auth.scheme === 'api_key' && !request.apiKey && toolkit.slug !== 'http') {
      throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', 'apiKey: required for this toolkit');
    }
    const check = await toolkit.checkCredential({
      http: deps.http,
      credential,
      apiBaseUrl: providerUrls(deps.config, toolkit).apiBaseUrl,
      settings: request.settings,
      timeoutMs: CHECK_TIMEOUT_MS,
    });
    if (!check.ok) throw new AppError('VALIDATION_FAILED', 'Credential refused', `apiKey: the test call failed: ${check.reason}`);
    const row = await repo.insertAccount(db, {
      id,
      owner_id: request.ownerId,
      toolkit: toolkit.slug,
      auth_config_id: null,
      label: request.label ?? null,
      status: 'ACTIVE',
      status_reason: null,
      access_token_enc: request.apiKey ? deps.secrets.seal(request.apiKey) : null,
      identity: check.identity === undefined ? null : toStorable(check.identity),
      settings: request.settings,
      scopes: [],
    });
    return { account: toAccount(row), authorizationUrl: null, expiresAt: null };
  }
  const authConfigId = request.authConfigId ?? `${PLATFORM_PREFIX}${toolkit.slug}`;
  const client = await clientOf(deps, request.ownerId, authConfigId, toolkit.slug);
  if (!client) {
    throw new AppError(
      request.authConfigId ? 'NOT_FOUND' : 'VALIDATION_FAILED',
      request.authConfigId ? 'Auth config not found' : 'Invalid request parameters',
      request.authConfigId ? 'No auth config of yours has this id' : `authConfigId: required (the platform has no ${toolkit.slug} client)`,
    );
  }
  if (!request.redirectUri) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', 'No public origin to return to (set PUBLIC_ORIGINS)');
  const scopes = request.scopes ?? ('scopes' in client && client.scopes?.length ? client.scopes : toolkit.auth.scopes);
  const state = randomToken();
  const { verifier, challenge } = pkcePair();
  const expiresAt = new Date(Date.now() + STATE_TTL_MS);
  const row = await db.transaction().execute(async (trx) => {
    const account = await repo.insertAccount(trx, {
      id,
      owner_id: request.ownerId,
      toolkit: toolkit.slug,
      auth_config_id: authConfigId,
      label: request.label ?? null,
      status: 'INITIATED',
      status_reason: 'Waiting for the owner to authorise at the provider',
      settings: request.settings,
      scopes,
    });
    await repo.insertState(trx, {
      state_hash: sha256(state),
      owner_id: request.ownerId,
      account_id: id,
      code_verifier_enc: deps.secrets.seal(verifier),
      redirect_uri: request.redirectUri!,
      expires_at: expiresAt,
    });
    return account;
  });
  const url = authorizeUrl(toolkit.auth, providerUrls(deps.config, toolkit).authorizeUrl, {
    clientId: client.clientId,
    redirectUri: request.redirectUri,
    state,
    challenge,
    scopes,
  });
  return { account: toAccount(row), authorizationUrl: url, expiresAt: expiresAt.toISOString() };
}

/**
 * The provider's redirect back: the state is used once (a replay or an expired state is refused before anything
 * else), then the code is exchanged with the PKCE verifier. A provider error or a refused exchange leaves the
 * account FAILED with the reason.
 */
export async function completeAuthorization(deps: Deps, input: { state: string; code?: string | undefined; error?: string | undefined }) {
  const db = deps.database.db;
  const state = await repo.consumeState(db, sha256(input.state));
  if (!state) throw new AppError('BAD_REQUEST', 'Invalid state', 'state: unknown, expired or already used; start the connection again');
  const account = await repo.findAccountById(db, state.account_id);
  const toolkit = account ? findToolkit(account.toolkit) : undefined;
  if (!account || !toolkit || account.status !== 'INITIATED')
    throw new AppError('BAD_REQUEST', 'Invalid state', 'state: the account is no longer waiting for authorisation');
  const fail = async (text: string) => {
    // The provider's words are kept only as storable text (no NUL, no lone surrogates).
    const reason = toStorable(text);
    return toAccount((await repo.updateAccount(db, account.id, { status: 'FAILED', status_reason: reason, last_error: reason }))!);
  };
  // RFC 6749's `error` is an ASCII code; anything else in it is the redirect's free text and is not kept.
  if (input.error || !input.code)
    return { account: await fail(`The provider reported ${input.error ? (identifier(input.error) ?? 'unknown_error') : 'no code'}`) };
  const client = await clientOf(deps, account.owner_id, account.auth_config_id, account.toolkit);
  if (!client) return { account: await fail('Its auth config was deleted during the authorization') };
  try {
    const tokens = await requestTokens(deps, providerUrls(deps.config, toolkit).tokenUrl, {
      grant_type: 'authorization_code',
      code: input.code,
      redirect_uri: state.redirect_uri,
      client_id: client.clientId,
      client_secret: client.clientSecret,
      code_verifier: deps.secrets.open(state.code_verifier_enc),
    });
    const row = await repo.updateAccount(db, account.id, {
      status: 'ACTIVE',
      status_reason: null,
      access_token_enc: deps.secrets.seal(tokens.accessToken),
      refresh_token_enc: tokens.refreshToken ? deps.secrets.seal(tokens.refreshToken) : null,
      token_expires_at: tokens.expiresAt,
      ...(tokens.scopes ? { scopes: tokens.scopes } : {}),
      last_refresh_at: new Date(),
      last_error: null,
    });
    return { account: toAccount(row!) };
  } catch (error) {
    return { account: await fail(error instanceof OAuthError ? error.message : 'The token exchange failed') };
  }
}

/** Activate: the credential is tried with the toolkit's test call first (refreshing an OAuth token if due). */
export async function activate(deps: Deps, account: repo.AccountRow) {
  const toolkit = knownToolkit(account.toolkit);
  if (account.status === 'INITIATED') throw new AppError('CONFLICT', 'Authorization not finished', 'Complete the authorization at the provider first');
  if (account.status === 'FAILED' && !account.access_token_enc && toolkit.auth.scheme === 'oauth2') {
    throw new AppError('CONFLICT', 'Account has no credential', 'Connect the account again');
  }
  // Tried as if active; the status changes only if the check passes.
  const credential = await credentialFor(deps, toolkit, { ...account, status: 'ACTIVE' });
  const check = await toolkit.checkCredential({
    http: deps.http,
    credential,
    apiBaseUrl: providerUrls(deps.config, toolkit).apiBaseUrl,
    settings: (account.settings as Record<string, unknown>) ?? {},
    timeoutMs: CHECK_TIMEOUT_MS,
  });
  if (!check.ok) {
    await repo.updateAccount(deps.database.db, account.id, { last_error: toStorable(check.reason) });
    throw new AppError('CONFLICT', 'Credential check failed', check.reason);
  }
  const row = await repo.updateAccount(deps.database.db, account.id, {
    status: 'ACTIVE',
    status_reason: null,
    // Named by the provider (a workspace, a calendar): stored as text, which refuses NUL.
    identity: check.identity === undefined ? account.identity : toStorable(check.identity),
    last_error: null,
  });
  return toAccount(row!);
}
