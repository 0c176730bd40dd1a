import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import {
  ApiError,
  createVisitorApi,
  type FormConfig,
  localStore,
  type PublicInterface,
  relayedStore,
  type SavedState,
  type Source,
  type StateStore,
  type ToolCall,
  type VisitorApi,
  type StoredMessage,
} from './api.ts';
import { errorKey, loadTranslations, type Translate } from './i18n.ts';
import { LeadForm } from './lead-form.tsx';
import { BookingOffer } from './booking-form.tsx';
import { HandoffForm } from './handoff-form.tsx';
import { renderMarkdown } from './markdown.ts';
import './chat.css';

interface Bubble {
  key: string;
  role: 'user' | 'assistant' | 'operator';
  content: string;
  sources: Source[];
  toolCalls: ToolCall[];
  formConfig: FormConfig | null;
  streaming?: boolean;
}

const root = document.getElementById('chat-root') as HTMLElement;
const slug = root.dataset.slug ?? '';
const embedded = root.dataset.embed === '1';
let bubbleCount = 0;
const nextKey = () => `b${++bubbleCount}`;

/** The embedding page, when it is one the owner allowed (the CSP already refused any other parent). */
function parentOrigin(): string | null {
  if (!embedded || window.parent === window) return null;
  let allowed: string[] = [];
  try {
    allowed = JSON.parse(root.dataset.parentOrigins ?? '[]') as string[];
  } catch {
    return null;
  }
  const ancestor = location.ancestorOrigins?.[0] ?? (document.referrer ? new URL(document.referrer).origin : '');
  const matches = (entry: string) => {
    if (entry === ancestor) return true;
    const wildcard = /^(https?:\/\/)\*\.(.+)$/.exec(entry);
    return wildcard !== null && ancestor.startsWith(wildcard[1] ?? '') && ancestor.slice((wildcard[1] ?? '').length).endsWith(`.${wildcard[2]}`);
  };
  return allowed.some(matches) ? ancestor : null;
}

function SourceList({ sources, t }: { sources: Source[]; t: Translate }) {
  if (sources.length === 0) return null;
  return (
    <details class="sources" data-testid="chat-sources">
      <summary>
        {t('chat.sources')} ({sources.length})
      </summary>
      <ul>
        {sources.map((source) => (
          <li key={source.chunkId} data-testid="chat-source">
            <span class="source-file">{source.metadata.fileName}</span>
            {(source.page ?? source.metadata.page) !== null && <span class="source-page"> · p. {source.page ?? source.metadata.page}</span>}
            <span class="source-score"> · {Math.round(source.score * 100)}%</span>
          </li>
        ))}
      </ul>
    </details>
  );
}

function Message({
  bubble,
  t,
  locale,
  api,
  onBooked,
}: {
  bubble: Bubble;
  t: Translate;
  locale: string;
  api: VisitorApi;
  onBooked: (message: StoredMessage | null) => void;
}) {
  const who = bubble.role === 'user' ? t('chat.you') : t('chat.assistant');
  return (
    <div class={`message ${bubble.role}`} data-testid="chat-message" data-role={bubble.role}>
      <span class="visually-hidden">{who}: </span>
      {bubble.role === 'user' ? (
        <p class="text">{bubble.content}</p>
      ) : (
        // biome-ignore lint/security/noDangerouslySetInnerHtml: renderMarkdown escapes raw HTML and refuses unsafe link schemes (markdown.ts)
        <div class="text" dangerouslySetInnerHTML={{ __html: renderMarkdown(bubble.content) }} />
      )}
      {!bubble.streaming && <SourceList sources={bubble.sources} t={t} />}
      {!bubble.streaming &&
        bubble.toolCalls
          .filter((c) => c.name === 'book_slot' && Array.isArray(c.arguments.slots))
          .map((call) => <BookingOffer key={call.name} call={call} t={t} locale={locale} api={api} onBooked={onBooked} />)}
      {!bubble.streaming && bubble.formConfig?.fields && <LeadForm config={bubble.formConfig} t={t} api={api} />}
    </div>
  );
}

/** Messages from the loader: only from the allowed parent window's origin. */
const fromParent = (event: MessageEvent, parent: string) => event.origin === parent && event.source === window.parent;
/** The loader asked to open (focus the input) before the chat had rendered. */
let openRequested = false;

function App({ api, profile, t, locale, parent }: { api: VisitorApi; profile: PublicInterface; t: Translate; locale: string; parent: string | null }) {
  const [handoff, setHandoff] = useState(false);
  const welcome = (): Bubble => ({
    key: 'welcome',
    role: 'assistant',
    content: profile.welcomeMessage || t('chat.welcome'),
    sources: [],
    toolCalls: [],
    formConfig: null,
  });
  const [bubbles, setBubbles] = useState<Bubble[]>([welcome()]);
  const [draft, setDraft] = useState('');
  const [busy, setBusy] = useState(false);
  const [waiting, setWaiting] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const input = useRef<HTMLTextAreaElement>(null);
  const log = useRef<HTMLDivElement>(null);

  // biome-ignore lint/correctness/useExhaustiveDependencies: once, when the chat first renders (its props never change)
  useEffect(() => {
    api.history().then(
      (messages) =>
        messages.length > 0 &&
        setBubbles([
          welcome(),
          ...messages.map((m) => ({
            key: nextKey(),
            role: m.role,
            content: m.content,
            sources: m.sources ?? [],
            toolCalls: m.toolCalls ?? [],
            formConfig: null,
          })),
        ]),
      (failure: unknown) => setError(t(errorKey(failure instanceof ApiError ? failure.code : 'NETWORK'))),
    );
    if (openRequested) input.current?.focus();
    if (parent) {
      const onMessage = (event: MessageEvent) => {
        if (fromParent(event, parent) && (event.data as { type?: string } | null)?.type === 'svc-chat:open') input.current?.focus();
      };
      window.addEventListener('message', onMessage);
      return () => window.removeEventListener('message', onMessage);
    }
    return undefined;
  }, []);

  // biome-ignore lint/correctness/useExhaustiveDependencies: the log follows its content, which these change
  useEffect(() => {
    log.current?.scrollTo({ top: log.current.scrollHeight });
  }, [bubbles, waiting, error]);

  async function send(text: string) {
    const message = text.trim();
    if (!message || busy) return;
    setDraft('');
    setError(null);
    setBusy(true);
    setWaiting(true);
    const replyKey = nextKey();
    setBubbles((list) => [...list, { key: nextKey(), role: 'user', content: message, sources: [], toolCalls: [], formConfig: null }]);
    try {
      let started = false;
      for await (const event of api.send(message)) {
        if (!started) {
          started = true;
          setWaiting(false);
          setBubbles((list) => [...list, { key: replyKey, role: 'assistant', content: '', sources: [], toolCalls: [], formConfig: null, streaming: true }]);
        }
        setBubbles((list) =>
          list.map((b) =>
            b.key !== replyKey
              ? b
              : event.type === 'delta'
                ? { ...b, content: b.content + event.text }
                : { ...b, content: event.message, sources: event.sources, toolCalls: event.toolCalls, formConfig: event.formConfig, streaming: false },
          ),
        );
      }
    } catch (failure) {
      setBubbles((list) => list.filter((b) => !(b.key === replyKey && b.content === '')).map((b) => (b.key === replyKey ? { ...b, streaming: false } : b)));
      setError(t(errorKey(failure instanceof ApiError ? failure.code : 'NETWORK')));
    } finally {
      setWaiting(false);
      setBusy(false);
      input.current?.focus();
    }
  }

  function startOver() {
    api.newConversation();
    setBubbles([welcome()]);
    setError(null);
    input.current?.focus();
  }

  return (
    <main class="chat">
      <header class="chat-header">
        {profile.avatarUrl && <img class="avatar" src={profile.avatarUrl} alt="" width={36} height={36} />}
        <h1>{profile.name}</h1>
        <button type="button" class="header-button" data-testid="chat-new" onClick={startOver}>
          {t('chat.newConversation')}
        </button>
        <button type="button" class="header-button" data-testid="chat-handoff" aria-expanded={handoff} onClick={() => setHandoff(!handoff)}>
          {t('handoff.open')}
        </button>
        {parent && (
          <button
            type="button"
            class="header-button close"
            aria-label={t('chat.close')}
            onClick={() => window.parent.postMessage({ type: 'svc-chat:close' }, parent)}
          >
            <svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true" focusable="false">
              <path fill="currentColor" d="M6.4 5 5 6.4 10.6 12 5 17.6 6.4 19l5.6-5.6 5.6 5.6 1.4-1.4-5.6-5.6L19 6.4 17.6 5 12 10.6z" />
            </svg>
          </button>
        )}
      </header>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard to be scrolled without a mouse */}
      <div class="log" role="log" aria-live="polite" aria-label={profile.name} ref={log} tabIndex={0}>
        {bubbles.map((bubble) => (
          <Message
            key={bubble.key}
            bubble={bubble}
            t={t}
            locale={locale}
            api={api}
            onBooked={(message) =>
              message &&
              setBubbles((list) => [
                ...list,
                { key: nextKey(), role: message.role, content: message.content, sources: [], toolCalls: message.toolCalls ?? [], formConfig: null },
              ])
            }
          />
        ))}
        {handoff && <HandoffForm t={t} api={api} onClose={() => setHandoff(false)} />}
        {waiting && (
          <p class="typing" data-testid="chat-typing">
            {t('chat.typing', { name: profile.name })}
          </p>
        )}
        {error && (
          <p class="error" role="alert" data-testid="chat-error">
            {error}
          </p>
        )}
      </div>
      <form
        class="composer"
        onSubmit={(event) => {
          event.preventDefault();
          void send(draft);
        }}
      >
        <label for="chat-input" class="visually-hidden">
          {t('chat.messageLabel')}
        </label>
        <textarea
          id="chat-input"
          ref={input}
          data-testid="chat-input"
          rows={1}
          maxLength={4000}
          value={draft}
          placeholder={profile.placeholder || t('chat.placeholder')}
          onInput={(event) => setDraft((event.target as HTMLTextAreaElement).value)}
          onKeyDown={(event) => {
            if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
              event.preventDefault();
              void send(draft);
            }
          }}
        />
        <button type="submit" class="send" data-testid="chat-send" disabled={busy}>
          {t('chat.send')}
        </button>
      </form>
    </main>
  );
}

function Unavailable({ text }: { text: string }) {
  return (
    <main class="chat unavailable">
      <h1>{text}</h1>
    </main>
  );
}

/** The loader's saved state for this chat (it answers `ready` with it); nothing after a second means none. */
function stateFromLoader(parent: string): Promise<StateStore> {
  const save = (state: SavedState) => window.parent.postMessage({ type: 'svc-chat:save', state }, parent);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(relayedStore({}, save)), 1000);
    window.addEventListener('message', (event: MessageEvent) => {
      if (!fromParent(event, parent)) return;
      const data = event.data as { type?: string; state?: SavedState } | null;
      if (data?.type === 'svc-chat:open') openRequested = true;
      if (data?.type === 'svc-chat:state') {
        clearTimeout(timer);
        const state = data.state ?? {};
        resolve(
          relayedStore(
            {
              resumeToken: typeof state.resumeToken === 'string' ? state.resumeToken : undefined,
              sessionId: typeof state.sessionId === 'string' ? state.sessionId : undefined,
            },
            save,
          ),
        );
      }
    });
    window.parent.postMessage({ type: 'svc-chat:ready' }, parent);
  });
}

async function boot() {
  const parent = parentOrigin();
  const [{ locale, t }, store] = await Promise.all([loadTranslations(navigator.language), parent ? stateFromLoader(parent) : localStore(slug)]);
  const api = createVisitorApi(slug, store);
  document.documentElement.lang = locale;
  try {
    const profile = await api.startSession();
    document.title = profile.name;
    if (profile.primaryColor) document.documentElement.style.setProperty('--svc-primary', profile.primaryColor);
    render(<App api={api} profile={profile} t={t} locale={locale} parent={parent} />, root);
  } catch (failure) {
    const notFound = failure instanceof ApiError && failure.status === 404;
    render(<Unavailable text={notFound ? t('chat.notAvailable') : t(errorKey(failure instanceof ApiError ? failure.code : 'NETWORK'))} />, root);
  }
}

void boot();
