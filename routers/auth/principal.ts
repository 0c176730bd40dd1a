/** Who is calling: the types every layer above the auth area names (kept apart from the resolver to avoid a cycle). */
export interface OwnerPrincipal {
  id: string;
  email: string;
  name: string | null;
  plan: 'free' | 'premium' | 'enterprise';
  role: 'owner' | 'admin';
}

/** The chat interface an API key is bound to, read with the key (the chat endpoint needs nothing else). */
export interface KeyInterface {
  id: string;
  owner_id: string;
  slug: string;
  config_id: string | null;
  endpoint_url: string | null;
  endpoint_type: string | null;
  endpoint_api_key_enc: string | null;
}

export type Caller =
  | { kind: 'owner'; owner: OwnerPrincipal; sessionId: string }
  | { kind: 'apiKey'; keyId: string; ownerId: string; chatInterfaceId: string; chatInterface?: KeyInterface }
  /** An anonymous visitor of a public chat interface (hosted page, widget), from a short-lived visitor token. */
  | { kind: 'visitor'; visitorId: string; chatInterfaceId: string }
  | { kind: 'anonymous'; reason: 'missing' | 'invalid' };
