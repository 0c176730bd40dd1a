import type { GuardedHttpClient } from '../../adapters/outbound/http/guarded-client.ts';

/** A JSON Schema object describing a tool's input (draft 2020-12 subset: type object, properties, required). */
export type JsonSchema = Record<string, unknown>;

/** The credential a tool call runs with: decrypted just for the call, never stored or returned. */
export type ToolCredential = { kind: 'oauth2'; accessToken: string } | { kind: 'api_key'; apiKey: string } | { kind: 'none' };

export interface ToolContext {
  /** The one SSRF-guarded outbound client: every provider call goes through it. */
  http: GuardedHttpClient;
  credential: ToolCredential;
  /** The toolkit's API base URL (its default, or the operator's override from TOOLHUB_PROVIDER_URLS). */
  apiBaseUrl: string;
  /** Per-account settings the toolkit defines (the generic HTTP tool's endpoint and input schema). */
  settings: Record<string, unknown>;
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface ToolDefinition {
  /** Unique within the toolkit, snake_case; offered to models as `<toolkit>__<name>`. */
  name: string;
  description: string;
  inputSchema: JsonSchema;
  /** Runs the call; throws ToolError with a message fit for the owner (never the provider's raw body). */
  run(input: Record<string, unknown>, ctx: ToolContext): Promise<unknown>;
}

export interface OAuth2Scheme {
  scheme: 'oauth2';
  authorizeUrl: string;
  tokenUrl: string;
  /** Scopes asked for by default. */
  scopes: string[];
  /** How scopes are joined in the authorize URL (Slack: ',', others ' '). */
  scopeSeparator: ' ' | ',';
}

export interface ApiKeyScheme {
  scheme: 'api_key';
  /** Shown to owners: where to find the key. */
  hint: string;
}

export interface NoAuthScheme {
  scheme: 'none';
}

export interface Toolkit {
  slug: string;
  name: string;
  description: string;
  auth: OAuth2Scheme | ApiKeyScheme | NoAuthScheme;
  apiBaseUrl: string;
  /** JSON Schema of per-account settings (empty object schema when none). */
  settingsSchema: JsonSchema;
  /** What the settings schema cannot say (checked after it): the 400's details, naming the setting, or undefined when fine. */
  settingsProblem?(settings: Record<string, unknown>): string | undefined;
  tools: ToolDefinition[];
  /** A cheap authenticated call proving the credential works (before storing an API key, on activate). */
  checkCredential(ctx: ToolContext): Promise<{ ok: true; identity?: string } | { ok: false; reason: string }>;
  /** A URL that answers when the provider is up (GET /toolhub/status asks it, unauthenticated). */
  statusUrl(apiBaseUrl: string): string;
}

/** A tool failure worded for the owner and the model: what failed, never the provider's raw body. */
export class ToolError extends Error {
  constructor(
    message: string,
    readonly retryable = false,
  ) {
    super(message);
    this.name = 'ToolError';
  }
}

/** The provider refused the credential itself (revoked, expired, not authorised): the account needs reconnecting. */
export class CredentialRefusedError extends ToolError {
  constructor(message: string) {
    super(message, false);
    this.name = 'CredentialRefusedError';
  }
}
