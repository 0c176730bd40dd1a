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
  /** AES-256-GCM ciphertext of the upstream API key (see adapters/outbound/secrets.ts). */
  endpoint_api_key_enc: string | null;
  welcome_message: string | null;
  primary_color: string | null;
  placeholder: string | null;
  avatar_webp: Uint8Array | null;
  avatar_version: Generated<number>;
  /** Open to anonymous visitors (the hosted page and the widget). */
  public: Generated<boolean>;
  /** Origins (scheme://host[:port]) allowed to frame the hosted page; enforced with CSP frame-ancestors. */
  allowed_origins: Generated<string[]>;
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
  /** Whose job this is, for a queue that claims fairly (routers/jobs/repository.ts claimJobs). */
  fair_key: string | null;
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
  provider: 'openai' | 'messages';
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
  /** The embedding model new vectors are being made with (the target of a re-embedding). */
  embedding: EmbeddingSettings;
  embedding_api_key_enc: string | null;
  /** The model the served vectors were made with: queries and new documents use it until the switch. */
  serving_embedding: EmbeddingSettings;
  serving_embedding_api_key_enc: string | null;
  llm: LlmSettings | null;
  llm_api_key_enc: string | null;
  memory_enabled: boolean;
  memory_max_messages: number;
  tools: KbToolSetting[];
  /** The version new vectors are written under; serving_version is the one queries read. */
  embedding_version: Generated<number>;
  serving_version: Generated<number>;
  /** Why the last switch to `embedding` failed (its re-embedding job died); null while it runs or once it served. */
  embedding_error: string | null;
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
  /** The uploaded file in the blob store, or null when its bytes are in kb_document_contents. */
  blob_key: string | null;
  status: DocumentStatus;
  stage: DocumentStage;
  error: string | null;
  page_count: number | null;
  chunk_count: Generated<number>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

/** A small document's uploaded bytes (see migration 0023). */
export interface KbDocumentContentsTable {
  document_id: string;
  bytes: Buffer;
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
  /** The chunk's distinct analysed terms, and at the same positions in tfs how often each occurs (BM25's postings). */
  terms: string[];
  tfs: number[];
}

export interface KbVectorsTable {
  chunk_id: string;
  config_id: string;
  version: number;
  /** float32 values, big-endian (PostgreSQL's binary form of real); see routers/knowledge-base/search-repository.ts. */
  embedding: Uint8Array;
}

export interface ChatSessionsTable {
  /** `api_<timestamp>_<random>` when generated by the service. */
  id: string;
  chat_interface_id: string;
  owner_id: string;
  /** The anonymous visitor whose conversation this is (hosted page, widget); null for API-key sessions. */
  visitor_id: Generated<string | null>;
  created_at: CreatedAt;
  last_message_at: Date;
}

export interface VisitorsTable {
  id: string;
  chat_interface_id: string;
  owner_id: string;
  resume_hash: string;
  created_at: CreatedAt;
  last_seen_at: Generated<Date>;
}

export interface UsagePeriodsTable {
  owner_id: string;
  /** The first day of the calendar month (UTC) the counts belong to. */
  period_start: ColumnType<Date, string, string>;
  messages: ColumnType<string, number | undefined, never>;
  queries: ColumnType<string, number | undefined, never>;
  tokens_in: ColumnType<string, number | undefined, never>;
  tokens_out: ColumnType<string, number | undefined, never>;
}

export interface DomainsTable {
  id: string;
  owner_id: string;
  hostname: string;
  chat_interface_id: string | null;
  status: Generated<'pending_verification' | 'verified' | 'active' | 'inactive'>;
  status_reason: string | null;
  verification_token: string;
  verified_at: Date | null;
  activated_at: Date | null;
  last_dns: unknown;
  dns_checked_at: Date | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface DomainCertificatesTable {
  domain_id: string;
  hostname: string;
  status: 'pending' | 'issued' | 'renewing' | 'failed';
  reason: string | null;
  cert_pem: string | null;
  key_enc: string | null;
  not_before: Date | null;
  not_after: Date | null;
  issuer: string | null;
  updated_at: Generated<Date>;
}

export interface BookingAvailabilityTable {
  chat_interface_id: string;
  owner_id: string;
  time_zone: string;
  weekly: unknown;
  overrides: unknown;
  slot_minutes: number;
  interval_minutes: number;
  buffer_before_minutes: number;
  buffer_after_minutes: number;
  min_notice_minutes: number;
  max_days_ahead: number;
  max_per_day: number | null;
  updated_at: Generated<Date>;
}

export interface BookingsTable {
  id: string;
  owner_id: string;
  chat_interface_id: string;
  status: 'confirmed' | 'cancelled';
  source: 'api' | 'manual' | 'chat';
  start_at: Date;
  end_at: Date;
  exclusive: Generated<boolean>;
  attendee_name: string;
  attendee_email: string;
  attendee_phone: string | null;
  attendee_time_zone: string;
  notes: string | null;
  visitor_id: string | null;
  session_id: string | null;
  cancel_token_hash: string;
  sequence: Generated<number>;
  cancel_reason: string | null;
  cancelled_by: 'owner' | 'attendee' | null;
  cancelled_at: Date | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface ToolhubAuthConfigsTable {
  id: string;
  owner_id: string;
  toolkit: string;
  name: string;
  client_id: string;
  client_secret_enc: string;
  scopes: unknown;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export type ToolhubAccountStatus = 'INITIATED' | 'ACTIVE' | 'DISABLED' | 'EXPIRED' | 'FAILED' | 'REVOKED';

export interface ToolhubAccountsTable {
  id: string;
  owner_id: string;
  toolkit: string;
  auth_config_id: string | null;
  label: string | null;
  status: ToolhubAccountStatus;
  status_reason: string | null;
  settings: unknown;
  access_token_enc: string | null;
  refresh_token_enc: string | null;
  token_expires_at: Date | null;
  scopes: unknown;
  identity: string | null;
  refresh_lease_until: Date | null;
  last_refresh_at: Date | null;
  last_error: string | null;
  last_used_at: Date | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface ToolhubOauthStatesTable {
  state_hash: string;
  owner_id: string;
  account_id: string;
  code_verifier_enc: string;
  redirect_uri: string;
  expires_at: Date;
  used_at: Date | null;
}

export interface ToolhubEnabledToolsTable {
  config_id: string;
  account_id: string;
  tool: string;
  owner_id: string;
}

export type TicketStatus = 'open' | 'pending' | 'resolved' | 'closed';
export type TicketPriority = 'low' | 'normal' | 'high' | 'urgent';

export interface SupportTicketsTable {
  id: string;
  reference: string;
  owner_id: string | null;
  chat_interface_id: string | null;
  session_id: string | null;
  transcript: unknown;
  requester_name: string;
  requester_email: string;
  subject: string;
  category: string | null;
  status: TicketStatus;
  priority: TicketPriority;
  assignee: string | null;
  /** When the requester proved the address through the confirmation link (migration 0027); replies to a hand-off are mailed only after. */
  requester_confirmed_at: Date | null;
  /** SHA-256 of the confirmation link's token; null for tickets to the admins (their replies need no proof). */
  confirm_token_hash: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface SupportMessagesTable {
  id: string;
  ticket_id: string;
  author: 'requester' | 'owner' | 'admin';
  author_id: string | null;
  body: string;
  created_at: Generated<Date>;
}

export interface AcmeChallengesTable {
  token: string;
  key_authorization: string;
  created_at: Generated<Date>;
}

export interface AcmeAccountsTable {
  directory_url: string;
  key_enc: string;
  account_url: string | null;
}

export interface BillingAccountsTable {
  owner_id: string;
  stripe_customer_id: string | null;
  stripe_subscription_id: string | null;
  subscription_plan: 'premium' | 'enterprise' | null;
  subscription_status: string | null;
  billing_interval: 'month' | 'year' | null;
  current_period_start: Date | null;
  current_period_end: Date | null;
  cancel_at_period_end: Generated<boolean>;
  subscription_trial_end: Date | null;
  /** Stripe's `created` of the stored subscription (migration 0025; null for rows stored before it). */
  subscription_created_at: Date | null;
  /** The newest Checkout Session made for the owner (migration 0026): the one a next checkout expires. */
  open_checkout_session_id: string | null;
  trial_plan: 'premium' | 'enterprise' | null;
  trial_started_at: Date | null;
  trial_end: Date | null;
  trial_expired_at: Date | null;
  updated_at: Generated<Date>;
}

export interface BillingEventsTable {
  id: string;
  type: string;
  owner_id: string | null;
  received_at: Generated<Date>;
}

export interface LeadsTable {
  id: string;
  owner_id: string;
  chat_interface_id: string;
  visitor_id: string | null;
  session_id: string | null;
  fields: Record<string, string>;
  created_at: CreatedAt;
}

export interface ChatMessagesTable {
  id: string;
  seq: Generated<string>;
  session_id: string;
  role: 'user' | 'assistant' | 'operator';
  content: string;
  sources: unknown;
  usage: unknown;
  tool_calls: unknown;
  created_at: CreatedAt;
}

export interface WebhooksTable {
  id: string;
  owner_id: string;
  url: string;
  description: string | null;
  events: string[];
  enabled: Generated<boolean>;
  secret_enc: string;
  previous_secret_enc: string | null;
  previous_secret_expires_at: Date | null;
  disabled_reason: string | null;
  disabled_at: Date | null;
  failing_since: Date | null;
  last_success_at: Date | null;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface WebhookEventsTable {
  id: string;
  owner_id: string;
  type: string;
  body: string;
  created_at: CreatedAt;
}

export interface WebhookAttempt {
  at: string;
  trigger: 'automatic' | 'replay';
  httpStatus: number | null;
  latencyMs: number;
  responseExcerpt: string | null;
  error: string | null;
}

export interface WebhookDeliveriesTable {
  id: string;
  webhook_id: string;
  event_id: string;
  owner_id: string;
  status: Generated<'pending' | 'succeeded' | 'failed' | 'exhausted'>;
  attempt_count: Generated<number>;
  attempts: ColumnType<WebhookAttempt[], string | undefined, string>;
  next_attempt_at: Date | null;
  last_attempt_at: Date | null;
  last_http_status: number | null;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

/** Dashboard rollups (0015): counters per owner, UTC day and interface (the nil uuid: no interface). */
export interface ActivityDailyTable {
  owner_id: string;
  day: ColumnType<Date, string, string>;
  chat_interface_id: string;
  metric: string;
  value: ColumnType<string, number, number>;
}

export interface ActivityVisitorsTable {
  owner_id: string;
  day: ColumnType<Date, string, string>;
  chat_interface_id: string;
  visitor_key: string;
}

export interface ActivityVisitorSketchesTable {
  owner_id: string;
  day: ColumnType<Date, string, string>;
  chat_interface_id: string;
  registers: Uint8Array;
}

export interface ActivityQuestionsTable {
  owner_id: string;
  day: ColumnType<Date, string, string>;
  chat_interface_id: string;
  question: string;
  count: ColumnType<string, number, number>;
}

/** Security monitoring (0016): events as they happen (sampled under a flood) and exact hourly counts. */
export interface SecurityEventsTable {
  id: string;
  kind: string;
  occurred_at: Date;
  owner_id: string | null;
  chat_interface_id: string | null;
  ip: string | null;
  detail: ColumnType<Record<string, string | number | boolean | null>, string, string>;
}

/** owner_id and chat_interface_id are the nil uuid when the event named none (key columns cannot be null). */
export interface SecurityEventCountsTable {
  hour: Date;
  kind: string;
  owner_id: Generated<string>;
  chat_interface_id: Generated<string>;
  count: ColumnType<string, number, number>;
}

export interface DB {
  webhooks: WebhooksTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  chat_sessions: ChatSessionsTable;
  visitors: VisitorsTable;
  leads: LeadsTable;
  usage_periods: UsagePeriodsTable;
  billing_accounts: BillingAccountsTable;
  billing_events: BillingEventsTable;
  domains: DomainsTable;
  domain_certificates: DomainCertificatesTable;
  acme_challenges: AcmeChallengesTable;
  acme_accounts: AcmeAccountsTable;
  booking_availability: BookingAvailabilityTable;
  bookings: BookingsTable;
  toolhub_auth_configs: ToolhubAuthConfigsTable;
  toolhub_accounts: ToolhubAccountsTable;
  toolhub_oauth_states: ToolhubOauthStatesTable;
  toolhub_enabled_tools: ToolhubEnabledToolsTable;
  support_tickets: SupportTicketsTable;
  support_messages: SupportMessagesTable;
  activity_daily: ActivityDailyTable;
  activity_visitors: ActivityVisitorsTable;
  activity_visitor_sketches: ActivityVisitorSketchesTable;
  activity_questions: ActivityQuestionsTable;
  security_events: SecurityEventsTable;
  security_event_counts: SecurityEventCountsTable;
  chat_messages: ChatMessagesTable;
  jobs: JobsTable;
  kb_configs: KbConfigsTable;
  kb_documents: KbDocumentsTable;
  kb_document_contents: KbDocumentContentsTable;
  kb_chunks: KbChunksTable;
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
export type WebhookRow = Selectable<WebhooksTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
