import type { ColumnType, Generated, Selectable } from 'kysely';

type CreatedAt = ColumnType<Date, Date | undefined, never>;
type UpdatedAt = ColumnType<Date, Date | undefined, Date>;

export interface OwnersTable {
  id: string;
  email: string;
  name: string | null;
  password_hash: string | null;
  oidc_subject: string | null;
  plan: 'free' | 'premium' | 'enterprise';
  role: 'owner' | 'admin';
  tour_completed_at: Date | null;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface SessionsTable {
  /** SHA-256 (hex) of the bearer token; the token itself is never stored. */
  id: string;
  owner_id: string;
  expires_at: Date;
}

export interface ChatInterfacesTable {
  id: string;
  owner_id: string;
  name: string;
  slug: string;
  config_id: string | null;
  endpoint_url: string | null;
  endpoint_type: string | null;
  /** AES-256-GCM ciphertext of the upstream API key (see server/secrets.ts). */
  endpoint_api_key_enc: string | null;
  welcome_message: string | null;
  primary_color: string | null;
  placeholder: string | null;
  avatar_webp: Uint8Array | null;
  avatar_version: Generated<number>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface ApiKeysTable {
  id: string;
  owner_id: string;
  chat_interface_id: string;
  name: string;
  /** SHA-256 (hex) of the whole key. */
  key_hash: string;
  /** The first characters of the key, shown so an owner can tell keys apart. */
  key_prefix: string;
  active: Generated<boolean>;
  last_used_at: Date | null;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface QueryCacheTable {
  owner_id: string;
  data: unknown;
  size_bytes: number;
  updated_at: UpdatedAt;
}

export interface DB {
  owners: OwnersTable;
  sessions: SessionsTable;
  chat_interfaces: ChatInterfacesTable;
  api_keys: ApiKeysTable;
  query_cache: QueryCacheTable;
}

export type OwnerRow = Selectable<OwnersTable>;
export type ChatInterfaceRow = Selectable<ChatInterfacesTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
