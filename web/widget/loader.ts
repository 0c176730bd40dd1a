/**
 * The embed loader, `/widget.js`: an owner pastes
 *   <script src="https://<service>/widget.js" data-slug="support-bot" async></script>
 * and this adds a launcher button and, on first open, an iframe of the hosted chat page. It is small and has no
 * dependencies; every style is set through the CSSOM (never a style element or attribute), so it works under
 * a host page's strict Content-Security-Policy. It talks to the iframe with postMessage and trusts only
 * messages from the service's origin and that iframe's window.
 */

interface SavedState {
  resumeToken?: string;
  sessionId?: string;
}

type Message =
  | { type: 'svc-chat:ready' }
  | { type: 'svc-chat:close' }
  | { type: 'svc-chat:open' }
  | { type: 'svc-chat:state'; state: SavedState }
  | { type: 'svc-chat:save'; state: SavedState };

const PREFIX = 'svc-chat';
const PANEL_WIDTH = 380;
const PANEL_HEIGHT = 600;
const MARGIN = 20;
const LAUNCHER_SIZE = 56;
const SMALL_SCREEN = '(max-width: 480px)';
const CHAT_ICON =
  'M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4H4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2zm3 6a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3zm5 0a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3zm5 0a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3z';
const CLOSE_ICON = 'M6.4 5 5 6.4 10.6 12 5 17.6 6.4 19l5.6-5.6 5.6 5.6 1.4-1.4-5.6-5.6L19 6.4 17.6 5 12 10.6z';

interface Loaded {
  open(): void;
  close(): void;
  toggle(): void;
}

declare global {
  interface Window {
    SvcChat?: Loaded;
    __svcChatLoaded?: Record<string, true>;
  }
}

function ownScript(): HTMLScriptElement | null {
  const current = document.currentScript as HTMLScriptElement | null;
  if (current?.dataset.slug) return current;
  const candidates = document.querySelectorAll<HTMLScriptElement>('script[src*="widget.js"][data-slug]');
  return candidates[candidates.length - 1] ?? null;
}

function setStyles(element: HTMLElement | SVGElement, styles: Record<string, string>) {
  for (const [name, value] of Object.entries(styles)) element.style.setProperty(name, value);
}

function icon(path: string): SVGSVGElement {
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('width', '28');
  svg.setAttribute('height', '28');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  const shape = document.createElementNS('http://www.w3.org/2000/svg', 'path');
  shape.setAttribute('d', path);
  shape.setAttribute('fill', 'currentColor');
  svg.appendChild(shape);
  return svg;
}

function start(script: HTMLScriptElement) {
  const slug = script.dataset.slug ?? '';
  if (!/^[a-z0-9][a-z0-9-]{1,62}[a-z0-9]$/.test(slug)) return;
  const loaded = (window.__svcChatLoaded ??= {});
  if (loaded[slug]) return;
  loaded[slug] = true;

  const serviceOrigin = new URL(script.src, location.href).origin;
  const side = script.dataset.position === 'left' ? 'left' : 'right';
  const color = /^#[0-9a-fA-F]{6}$/.test(script.dataset.color ?? '') ? (script.dataset.color as string) : '#1f4fd1';
  const label = script.dataset.label || 'Open chat';
  const panelId = `${PREFIX}-panel-${slug}`;
  const small = window.matchMedia(SMALL_SCREEN);

  const launcher = document.createElement('button');
  launcher.type = 'button';
  launcher.setAttribute('aria-label', label);
  launcher.setAttribute('aria-expanded', 'false');
  launcher.setAttribute('aria-controls', panelId);
  launcher.dataset.testid = `${PREFIX}-launcher`;
  launcher.appendChild(icon(CHAT_ICON));
  setStyles(launcher, {
    position: 'fixed',
    bottom: `${MARGIN}px`,
    [side]: `${MARGIN}px`,
    width: `${LAUNCHER_SIZE}px`,
    height: `${LAUNCHER_SIZE}px`,
    'border-radius': '50%',
    border: '2px solid #ffffff',
    background: color,
    color: '#ffffff',
    cursor: 'pointer',
    display: 'flex',
    'align-items': 'center',
    'justify-content': 'center',
    padding: '0',
    'box-shadow': '0 4px 16px rgba(0,0,0,0.25)',
    'z-index': '2147483646',
  });

  const panel = document.createElement('div');
  panel.id = panelId;
  setStyles(panel, {
    position: 'fixed',
    display: 'none',
    'z-index': '2147483647',
    'box-shadow': '0 8px 32px rgba(0,0,0,0.3)',
    'border-radius': '12px',
    overflow: 'hidden',
    background: '#ffffff',
  });

  let frame: HTMLIFrameElement | null = null;
  let ready = false;
  let isOpen = false;

  const layout = () => {
    if (small.matches) {
      setStyles(panel, { top: '0', left: '0', right: '0', bottom: '0', width: '100vw', height: '100%', 'border-radius': '0' });
      launcher.style.setProperty('display', isOpen ? 'none' : 'flex');
    } else {
      setStyles(panel, {
        top: 'auto',
        left: side === 'left' ? `${MARGIN}px` : 'auto',
        right: side === 'right' ? `${MARGIN}px` : 'auto',
        bottom: `${MARGIN * 2 + LAUNCHER_SIZE}px`,
        width: `min(${PANEL_WIDTH}px, calc(100vw - ${MARGIN * 2}px))`,
        height: `min(${PANEL_HEIGHT}px, calc(100vh - ${MARGIN * 3 + LAUNCHER_SIZE}px))`,
        'border-radius': '12px',
      });
      launcher.style.setProperty('display', 'flex');
    }
  };

  const post = (message: Message) => frame?.contentWindow?.postMessage(message, serviceOrigin);
  // The chat's state lives here, in the embedding site's own storage: browsers that block third-party storage
  // would make the iframe forget the visitor on every reload.
  const storageKey = `${PREFIX}:${slug}`;
  const loadState = (): SavedState => {
    try {
      return JSON.parse(localStorage.getItem(storageKey) ?? '{}') as SavedState;
    } catch {
      return {};
    }
  };
  const saveState = (state: SavedState) => {
    try {
      localStorage.setItem(storageKey, JSON.stringify({ resumeToken: state.resumeToken, sessionId: state.sessionId }));
    } catch {
      // Storage refused by the site's visitor: the chat lasts as long as the page.
    }
  };

  const ensureFrame = () => {
    if (frame) return frame;
    frame = document.createElement('iframe');
    frame.src = `${serviceOrigin}/c/${encodeURIComponent(slug)}?embed=1`;
    frame.title = 'Chat';
    frame.setAttribute('allow', 'clipboard-write');
    frame.dataset.testid = `${PREFIX}-frame`;
    setStyles(frame, { border: '0', width: '100%', height: '100%', display: 'block' });
    panel.appendChild(frame);
    return frame;
  };

  const open = () => {
    ensureFrame();
    isOpen = true;
    panel.style.setProperty('display', 'block');
    launcher.setAttribute('aria-expanded', 'true');
    launcher.replaceChildren(icon(CLOSE_ICON));
    launcher.setAttribute('aria-label', 'Close chat');
    layout();
    if (ready) post({ type: 'svc-chat:open' });
  };

  const close = () => {
    if (!isOpen) return;
    isOpen = false;
    panel.style.setProperty('display', 'none');
    launcher.setAttribute('aria-expanded', 'false');
    launcher.replaceChildren(icon(CHAT_ICON));
    launcher.setAttribute('aria-label', label);
    layout();
    launcher.focus();
  };

  const toggle = () => (isOpen ? close() : open());

  launcher.addEventListener('click', toggle);
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && isOpen) close();
  });
  window.addEventListener('message', (event: MessageEvent) => {
    // Only the chat page in our own iframe may speak to the loader.
    if (event.origin !== serviceOrigin || !frame || event.source !== frame.contentWindow) return;
    const data = event.data as Partial<Message> | null;
    if (data?.type === 'svc-chat:ready') {
      ready = true;
      post({ type: 'svc-chat:state', state: loadState() });
      if (isOpen) post({ type: 'svc-chat:open' });
    } else if (data?.type === 'svc-chat:save' && data.state) saveState(data.state);
    else if (data?.type === 'svc-chat:close') close();
  });
  small.addEventListener('change', layout);

  document.body.appendChild(panel);
  document.body.appendChild(launcher);
  layout();
  window.SvcChat = { open, close, toggle };
  if (script.dataset.open === 'true') open();
}

// currentScript is only set while the script first runs, so the tag is found before waiting for the body.
const own = ownScript();
if (own) {
  if (document.body) start(own);
  else document.addEventListener('DOMContentLoaded', () => start(own));
}
