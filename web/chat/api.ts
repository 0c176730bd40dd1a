/**
 * The chat page's side of the visitor API. The visitor token lives in memory only and travels in the
 * Authorization header; what survives a reload (the resume token and the current conversation) is kept in this
 * origin's localStorage, which browsers partition per embedding site. Errors surface as ApiError with the
 * service's code, for the page to put into words: the visitor never sees a response body.
 */

export interface PublicInterface {
  slug: string;
  name: string;
  avatarUrl: string | null;
  welcomeMessage: string | null;
  placeholder: string | null;
  primaryColor: string | null;
}

export interface Source {
  chunkId: string;
  score: number;
  page: number | null;
  metadata: { fileName: string; page: number | null };
}

export interface ToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

export interface FormField {
  name: string;
  label: string;
  type: 'text' | 'email' | 'tel' | 'textarea';
  required: boolean;
}

export interface FormConfig {
  tool?: string;
  title?: string;
  fields?: FormField[];
  submitLabel?: string;
}

export interface StoredMessage {
  id: string;
  role: 'user' | 'assistant' | 'operator';
  content: string;
  sources: Source[];
  toolCalls: ToolCall[];
}

export type ChatEvent =
  | { type: 'delta'; text: string }
  | { type: 'complete'; message: string; sources: Source[]; sessionId: string; toolCalls: ToolCall[]; formConfig: FormConfig | null };

export class ApiError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
  ) {
    super(code);
  }
}

/** What survives a reload: the visitor's resume token and the conversation in progress. */
export interface SavedState {
  resumeToken?: string;
  sessionId?: string;
}

export interface StateStore {
  read(): SavedState;
  update(change: SavedState): void;
}

/** The full page's own localStorage (first-party there); memory when the browser refuses storage. */
export function localStore(slug: string): StateStore {
  const key = `svc-chat:${slug}`;
  let memory: SavedState = {};
  const read = (): SavedState => {
    try {
      return JSON.parse(localStorage.getItem(key) ?? '{}') as SavedState;
    } catch {
      return memory;
    }
  };
  return {
    read,
    update(change) {
      memory = { ...read(), ...change };
      try {
        localStorage.setItem(key, JSON.stringify(memory));
      } catch {
        // Storage refused: the conversation lasts as long as the page.
      }
    },
  };
}

/**
 * Inside the widget's iframe the page is a third party, and browsers that block third-party storage would
 * forget the visitor on every reload. The state is kept by the loader instead, in the embedding site's own
 * storage, and reaches this page by postMessage (checked origins both ways); here it is held in memory.
 */
export function relayedStore(initial: SavedState, save: (state: SavedState) => void): StateStore {
  let state = { ...initial };
  return {
    read: () => state,
    update(change) {
      state = { ...state, ...change };
      save(state);
    },
  };
}

async function failure(response: Response): Promise<ApiError> {
  try {
    const body = (await response.json()) as { error?: { code?: string } };
    return new ApiError(body.error?.code ?? 'INTERNAL_ERROR', response.status);
  } catch {
    return new ApiError('INTERNAL_ERROR', response.status);
  }
}

export function createVisitorApi(slug: string, saved: StateStore) {
  const base = `/api/v1/chat/${encodeURIComponent(slug)}`;
  let token: string | null = null;
  /** When the token stops being accepted (the server's expiresAt, less a minute for clocks and the trip). */
  let tokenUntil = 0;

  async function startSession(): Promise<PublicInterface> {
    const response = await fetch(`${base}/visitor-sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(saved.read().resumeToken ? { resumeToken: saved.read().resumeToken } : {}),
    });
    if (!response.ok) throw await failure(response);
    const { data } = (await response.json()) as { data: { token: string; expiresAt: string; resumeToken: string | null; interface: PublicInterface } };
    token = data.token;
    tokenUntil = Date.parse(data.expiresAt) - 60_000;
    // A new visitor (the old resume token was unknown) starts without the old conversation.
    if (data.resumeToken) saved.update({ resumeToken: data.resumeToken, sessionId: undefined });
    return data.interface;
  }

  /** One authorised call; an expired visitor token is renewed with the resume token and the call made again. */
  async function authorised(path: string, init: RequestInit = {}): Promise<Response> {
    const attempt = () => fetch(`${base}${path}`, { ...init, headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${token}` } });
    let response = await attempt();
    if (response.status === 401) {
      await startSession();
      response = await attempt();
    }
    if (!response.ok) throw await failure(response);
    return response;
  }

  async function* send(message: string): AsyncGenerator<ChatEvent> {
    const sessionId = saved.read().sessionId;
    const response = await authorised('/visitor-messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify(sessionId ? { message, sessionId } : { message }),
    });
    if (!response.body) throw new ApiError('UPSTREAM_INVALID_RESPONSE', 502);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffered = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
      let end = buffered.indexOf('\n\n');
      while (end !== -1) {
        const frame = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        end = buffered.indexOf('\n\n');
        const data = frame
          .split('\n')
          .filter((line) => line.startsWith('data: '))
          .map((line) => line.slice(6))
          .join('\n');
        if (!data || data === '[DONE]') continue;
        const event = JSON.parse(data) as ChatEvent | { type: 'error'; error: { code: string } };
        if (event.type === 'error') throw new ApiError(event.error.code, 502);
        if (event.type === 'complete') saved.update({ sessionId: event.sessionId });
        yield event;
      }
    }
  }

  async function history(): Promise<StoredMessage[]> {
    const sessionId = saved.read().sessionId;
    if (!sessionId) return [];
    try {
      const response = await authorised(`/visitor-history?sessionId=${encodeURIComponent(sessionId)}`);
      return ((await response.json()) as { data: { messages: StoredMessage[] } }).data.messages;
    } catch (error) {
      // A conversation that is gone (or was another visitor's) is forgotten, not shown as an error.
      if (error instanceof ApiError && error.status === 404) {
        saved.update({ sessionId: undefined });
        return [];
      }
      throw error;
    }
  }

  async function submitLead(fields: Record<string, string>): Promise<void> {
    const sessionId = saved.read().sessionId;
    await authorised('/leads', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(sessionId ? { sessionId, fields } : { fields }),
    });
  }

  /** Books an offered slot in this conversation; the answer is the conversation's confirmation message. */
  async function book(booking: { start: string; attendee: { name: string; email: string; phone?: string; timeZone: string } }): Promise<StoredMessage | null> {
    const sessionId = saved.read().sessionId;
    const response = await authorised('/bookings', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(sessionId ? { sessionId, ...booking } : booking),
    });
    return ((await response.json()) as { data: { message: StoredMessage | null } }).data.message;
  }

  /** "Talk to a person": a support ticket for the interface's owner, with this conversation attached. */
  async function handOff(request: { name: string; email: string; message: string }): Promise<string> {
    // The visitor token proves the conversation is this visitor's; an expired one would send the ticket without
    // it (the form answers alike either way), so one about to expire is renewed first with the resume token.
    if (saved.read().sessionId && (token === null || Date.now() >= tokenUntil)) await startSession();
    const sessionId = saved.read().sessionId;
    const response = await fetch('/api/v1/support/contact', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ slug, subject: 'Talk to a person', category: 'general', ...request, ...(sessionId ? { sessionId } : {}) }),
    });
    if (!response.ok) throw await failure(response);
    return ((await response.json()) as { data: { ticket: { reference: string } } }).data.ticket.reference;
  }

  return {
    handOff,
    startSession,
    send,
    history,
    submitLead,
    book,
    newConversation: () => saved.update({ sessionId: undefined }),
  };
}

export type VisitorApi = ReturnType<typeof createVisitorApi>;
