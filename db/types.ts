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

export interface JobsTable {
  id: string;
  kind: string;
  payload: unknown;
  status: Generated<'queued' | 'running' | 'done' | 'dead'>;
  attempts: Generated<number>;
  max_attempts: Generated<number>;
  run_at: Generated<Date>;
  locked_by: string | null;
  lease_until: Date | null;
  last_error: string | null;
  dedupe_key: string | null;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface EmbeddingSettings {
  provider: 'local' | 'openai';
  model: string;
  baseUrl?: string;
  dimensions: number;
}

export interface LlmSettings {
  provider: 'openai';
  model: string;
  baseUrl: string;
}

export interface KbToolSetting {
  name: string;
  enabled: boolean;
  config?: Record<string, unknown>;
}

export interface KbConfigsTable {
  id: string;
  owner_id: string;
  name: string;
  temperature: number;
  max_tokens: number;
  chunk_size: number;
  chunk_overlap: number;
  retrieval_depth: number;
  language: string;
  system_prompt: string | null;
  embedding: EmbeddingSettings;
  embedding_api_key_enc: string | null;
  llm: LlmSettings | null;
  llm_api_key_enc: string | null;
  memory_enabled: boolean;
  memory_max_messages: number;
  tools: KbToolSetting[];
  /** The version new vectors are written under; serving_version is the one queries read. */
  embedding_version: Generated<number>;
  serving_version: Generated<number>;
  /** Bumped whenever the searchable content changes; keys in-memory vector caches. */
  content_version: Generated<number>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export type DocumentStatus = 'processing' | 'completed' | 'failed';
export type DocumentStage = 'uploaded' | 'extracting' | 'embedding' | 'indexing' | 'searchable' | 'failed';

export interface KbDocumentsTable {
  id: string;
  owner_id: string;
  config_id: string;
  file_name: string;
  kind: 'pdf' | 'docx' | 'txt' | 'md';
  size_bytes: ColumnType<number, number, number>;
  content_hash: string;
  blob_key: string;
  status: DocumentStatus;
  stage: DocumentStage;
  error: string | null;
  page_count: number | null;
  chunk_count: Generated<number>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface KbChunksTable {
  id: string;
  document_id: string;
  config_id: string;
  chunk_index: number;
  page: number | null;
  text: string;
  term_count: number;
  token_count: number;
}

export interface KbPostingsTable {
  config_id: string;
  term: string;
  chunk_id: string;
  tf: number;
}

export interface KbVectorsTable {
  chunk_id: string;
  config_id: string;
  version: number;
  embedding: number[];
}

export interface DB {
  jobs: JobsTable;
  kb_configs: KbConfigsTable;
  kb_documents: KbDocumentsTable;
  kb_chunks: KbChunksTable;
  kb_postings: KbPostingsTable;
  kb_vectors: KbVectorsTable;
  owners: OwnersTable;
  sessions: SessionsTable;
  chat_interfaces: ChatInterfacesTable;
  api_keys: ApiKeysTable;
  query_cache: QueryCacheTable;
}

export type OwnerRow = Selectable<OwnersTable>;
export type ChatInterfaceRow = Selectable<ChatInterfacesTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
