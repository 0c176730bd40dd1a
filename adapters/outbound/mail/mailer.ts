import type { Transporter } from 'nodemailer';
import type { Logger } from '../logger.ts';

export interface MailMessage {
  to: string[];
  subject: string;
  text: string;
  html?: string;
  replyTo?: string;
  /** An iCalendar invitation (see icalendar.ts): sent as a `text/calendar; method=…` alternative plus an invite.ics attachment. */
  calendar?: { method: 'REQUEST' | 'CANCEL'; ics: string };
}

export interface SendOptions {
  /** Abandons the send, closing its connection, when aborted (a job's signal: the queue stopping, a lost lease). */
  signal?: AbortSignal;
}

export interface Mailer {
  /**
   * Sends one message. Without SMTP_URL the message is logged (recipients and subject, never the body) and not sent: { delivered: false }.
   * A send still unfinished after the mailer's deadline, or whose signal aborts, is abandoned: its connection is closed and
   * it rejects with a MailDeliveryError (ETIMEDOUT or EABORT). The server may still have accepted the message.
   */
  send(message: MailMessage, options?: SendOptions): Promise<{ delivered: boolean; messageId: string | null }>;
  readonly enabled: boolean;
  close(): Promise<void>;
}

/** A failed SMTP delivery. The message names the failure (nodemailer code, SMTP reply code and text) and never carries the URL's credentials. */
export class MailDeliveryError extends Error {
  override readonly name = 'MailDeliveryError';
  constructor(
    message: string,
    /** nodemailer's error code, e.g. EENVELOPE, EAUTH, ECONNECTION, ETIMEDOUT */
    readonly code: string | null,
    /** The SMTP reply code, when the server answered (451, 550, …) */
    readonly responseCode: number | null,
    /** true for a permanent rejection (5xx), false for a temporary one worth retrying, null when the server did not answer */
    readonly permanent: boolean | null,
  ) {
    super(message);
  }
}

/**
 * A message the mailer refuses to send (a line break in a header, no recipient, a calendar whose METHOD disagrees):
 * the same message is refused on every attempt, so a job sending it should not be retried.
 */
export class InvalidMailError extends Error {
  override readonly name = 'InvalidMailError';
}

const DEFAULT_TIMEOUT_MS = 15_000;
const DEFAULT_SEND_TIMEOUT_MS = 60_000;
const LINE_BREAK = /[\r\n\0]/;

/**
 * `timeoutMs` bounds each network step (connecting, the greeting, a silence); `sendTimeoutMs` bounds the whole send,
 * which the steps' idle timers cannot: a server that trickles a byte every few seconds resets them for ever.
 */
export function createMailer(options: { smtpUrl?: string; from: string; logger: Logger; timeoutMs?: number; sendTimeoutMs?: number }): Mailer {
  const { from, logger } = options;
  const smtpUrl = options.smtpUrl?.trim() || undefined;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const sendTimeoutMs = options.sendTimeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
  refuseLineBreaks('from', from);
  if (!smtpUrl) return disabledMailer(logger);

  const secrets = urlSecrets(smtpUrl);
  if (!/^smtps?:\/\//i.test(smtpUrl)) throw new Error('SMTP_URL must be an smtp:// or smtps:// URL');
  // nodemailer is loaded with the first message, not at start-up: memory a service that sends no mail never needs.
  let transport: Promise<Transporter> | undefined;
  let closed = false;
  const transportFor = () => {
    // After close() (shutting down) a late job's message must not open a pool that nothing will close.
    if (closed) throw new MailDeliveryError('the mailer is closed (the service is stopping)', null, null, null);
    return (transport ??= import('nodemailer').then(({ default: nodemailer }) =>
      // The object form with `url` (rather than createTransport(url, defaults)) so the pool and timeouts apply; parameters in the URL still win.
      nodemailer.createTransport({
        url: smtpUrl,
        pool: true,
        connectionTimeout: timeoutMs,
        greetingTimeout: timeoutMs,
        socketTimeout: timeoutMs,
        logger: false,
        debug: false,
      }),
    ));
  };

  return {
    enabled: true,
    async send(message, sendOptions = {}) {
      validate(message);
      const { signal } = sendOptions;
      // The deadline and the caller's signal end the send through one signal: nodemailer (10.5+) then drops the
      // message and closes the pool connection carrying it; the pool's other connections go on.
      const abandon = new AbortController();
      const deadline = setTimeout(
        () => abandon.abort(new MailDeliveryError(`SMTP send abandoned: not finished within ${sendTimeoutMs} ms`, 'ETIMEDOUT', null, null)),
        sendTimeoutMs,
      );
      const onAbort = () => abandon.abort(new MailDeliveryError(`SMTP send abandoned: ${reasonText(signal?.reason)}`, 'EABORT', null, null));
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
      let info: { messageId?: string; rejected?: unknown[] };
      try {
        info = await (await transportFor()).sendMail({
          signal: abandon.signal,
          from,
          to: message.to,
          subject: message.subject,
          text: message.text,
          ...(message.html !== undefined && { html: message.html }),
          ...(message.replyTo !== undefined && { replyTo: message.replyTo }),
          ...(message.calendar && { icalEvent: { method: message.calendar.method, content: message.calendar.ics, filename: 'invite.ics' } }),
        });
      } catch (err) {
        if (abandon.signal.aborted && abandon.signal.reason instanceof MailDeliveryError) throw abandon.signal.reason;
        throw deliveryError(err, secrets);
      } finally {
        clearTimeout(deadline);
        signal?.removeEventListener('abort', onAbort);
      }
      const messageId = info.messageId ?? null;
      // nodemailer resolves when at least one recipient was accepted; the others are only listed in `rejected`.
      if (info.rejected?.length)
        logger.warn('mail: some recipients were rejected', { rejected: info.rejected.map(String), subject: message.subject, messageId });
      logger.debug('mail sent', { to: message.to, subject: message.subject, messageId });
      return { delivered: true, messageId };
    },
    async close() {
      closed = true;
      // Forced: a send still in flight at shutdown (its job already stopped) must not keep a stalling server's connection open.
      (await transport)?.close({ force: true });
    },
  };
}

function disabledMailer(logger: Logger): Mailer {
  return {
    enabled: false,
    async send(message) {
      validate(message);
      logger.info('mail not sent: SMTP_URL is not set', { to: message.to, subject: message.subject, calendar: message.calendar?.method ?? null });
      return { delivered: false, messageId: null };
    },
    async close() {},
  };
}

/** Header injection and malformed input are refused here, whatever nodemailer would make of them. */
function validate(message: MailMessage) {
  if (!Array.isArray(message.to) || message.to.length === 0) throw new InvalidMailError('mail: at least one recipient is required');
  for (const to of message.to) {
    if (typeof to !== 'string' || to.trim() === '') throw new InvalidMailError('mail: empty recipient');
    refuseLineBreaks('recipient', to);
  }
  if (typeof message.subject !== 'string') throw new InvalidMailError('mail: subject must be a string');
  refuseLineBreaks('subject', message.subject);
  if (message.replyTo !== undefined) refuseLineBreaks('reply-to', message.replyTo);
  if (message.calendar) {
    const { method, ics } = message.calendar;
    if (method !== 'REQUEST' && method !== 'CANCEL') throw new InvalidMailError('mail: calendar method must be REQUEST or CANCEL');
    // The Content-Type's method= and the body's METHOD: must agree, or calendar apps ignore (or misapply) the invitation.
    const inBody = /^METHOD:(.*)$/m.exec(ics)?.[1]?.trim().toUpperCase();
    if (inBody !== method) throw new InvalidMailError(`mail: calendar method ${method} does not match the invitation's METHOD:${inBody ?? ' (missing)'}`);
  }
}

const reasonText = (reason: unknown) => (reason instanceof Error ? reason.message : reason === undefined ? 'aborted' : String(reason));

function refuseLineBreaks(field: string, value: string) {
  if (LINE_BREAK.test(value)) throw new InvalidMailError(`mail: ${field} must not contain CR, LF or NUL`);
}

/** The password (and user) of the SMTP URL in every spelling that could show up in a message: as written and percent-decoded. */
function urlSecrets(smtpUrl: string): string[] {
  const found = new Set<string>();
  const add = (value: string) => {
    if (!value) return;
    found.add(value);
    try {
      found.add(decodeURIComponent(value));
    } catch {}
  };
  try {
    const url = new URL(smtpUrl);
    add(url.password);
  } catch {
    // Not parseable by WHATWG URL: fall back to the userinfo between '://' and the last '@'.
    const userinfo = /^[a-z]+:\/\/([^/]*)@/i.exec(smtpUrl)?.[1];
    if (userinfo?.includes(':')) add(userinfo.slice(userinfo.indexOf(':') + 1));
  }
  return [...found].filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
}

function redact(text: string, secrets: string[]): string {
  let out = text;
  for (const secret of secrets) out = out.split(secret).join('***');
  return out;
}

function deliveryError(err: unknown, secrets: string[]): MailDeliveryError {
  const e = (err ?? {}) as { message?: unknown; code?: unknown; responseCode?: unknown; response?: unknown; permanent?: unknown };
  const code = typeof e.code === 'string' ? e.code : null;
  const responseCode = typeof e.responseCode === 'number' ? e.responseCode : null;
  const permanent = typeof e.permanent === 'boolean' ? e.permanent : responseCode === null ? null : responseCode >= 500;
  const detail = typeof e.response === 'string' && e.response ? e.response : typeof e.message === 'string' ? e.message : String(err);
  const parts = ['SMTP send failed:', code, responseCode !== null && !detail.startsWith(String(responseCode)) ? String(responseCode) : null, detail];
  const message = redact(parts.filter(Boolean).join(' ').replace(/\s+/g, ' ').trim(), secrets);
  return new MailDeliveryError(message, code, responseCode, permanent);
}
