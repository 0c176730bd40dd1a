import { createRequire } from 'node:module';
import type Stripe from 'stripe';
import type { GuardedHttpClient, GuardedResponse } from '../http/guarded-client.ts';
import { OutboundError } from '../http/outbound-error.ts';

export type { Stripe };

// The SDK is loaded on first use (its CommonJS build, synchronously, ~60 ms once): a service without billing
// configured never pays its memory.
let stripeSdk: typeof Stripe | undefined;
const loadStripe = () => (stripeSdk ??= createRequire(import.meta.url)('stripe') as typeof Stripe);

/** Stripe's documented tolerance for a webhook's signed timestamp. */
export const STRIPE_WEBHOOK_TOLERANCE_SECONDS = 300;

/** Retries after a failed connection or a retryable answer, as the SDK's own `maxNetworkRetries: 2` did. */
const RETRIES = 2;
const RETRY_DELAY_MS = 500;

const pause = (ms: number, signal: AbortSignal | undefined) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });

/** Stripe's own advice first (`Stripe-Should-Retry`), else a lock conflict or a server error, as the SDK decides. */
const retryable = (status: number, headers: Record<string, string | string[] | undefined>) => {
  const advice = headers['stripe-should-retry'];
  return advice === 'true' || (advice !== 'false' && (status === 409 || status >= 500));
};

/**
 * The official SDK, with every request sent through the one SSRF-guarded client (a Stripe-compatible server on a
 * private address must be in OUTBOUND_ALLOW_HOSTS, like any other upstream). `timeoutMs` is the deadline of a whole
 * call, retries included: the SDK retried after a timeout too, so a Stripe that accepted connections and never
 * answered held a request for three timeouts and ended as a connection failure. So the SDK does not retry; the
 * fetch hook below does, under the SDK's one timeout signal, and never after a timeout. Every POST carries an
 * idempotency key (the SDK's, or our creates' own), so a retried one is applied once.
 */
export function createStripeClient(options: { secretKey: string; apiUrl?: string; http: GuardedHttpClient; timeoutMs: number }): Stripe {
  const fetchThroughGuard = async (url: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const signal = init.signal ?? undefined;
    const deadline = Date.now() + options.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      let response: GuardedResponse;
      try {
        response = await options.http.request(String(url), {
          method: init.method ?? 'GET',
          headers,
          body: typeof init.body === 'string' ? init.body : undefined,
          signal,
          timeoutMs: Math.max(deadline - Date.now(), 1),
        });
      } catch (error) {
        // As fetch does: an aborted request rejects with the signal's reason (the SDK's timeout error).
        if (signal?.aborted) throw signal.reason;
        if (!(error instanceof OutboundError && error.kind === 'connection_failed') || attempt >= RETRIES) throw error;
        await pause(RETRY_DELAY_MS * 2 ** attempt, signal);
        if (signal?.aborted) throw signal.reason;
        continue;
      }
      if (attempt < RETRIES && retryable(response.status, response.headers)) {
        await pause(RETRY_DELAY_MS * 2 ** attempt, signal);
        if (!signal?.aborted) continue;
      }
      const responseHeaders = new Headers();
      for (const [name, value] of Object.entries(response.headers)) {
        for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value]) responseHeaders.append(name, one);
      }
      return new Response(new Uint8Array(response.body), { status: response.status, headers: responseHeaders });
    }
  };
  const target = options.apiUrl ? new URL(options.apiUrl) : undefined;
  const StripeSdk = loadStripe();
  return new StripeSdk(options.secretKey, {
    httpClient: StripeSdk.createFetchHttpClient(fetchThroughGuard),
    maxNetworkRetries: 0,
    timeout: options.timeoutMs,
    telemetry: false,
    ...(target && {
      host: target.hostname,
      port: target.port || (target.protocol === 'http:' ? 80 : 443),
      protocol: target.protocol === 'http:' ? ('http' as const) : ('https' as const),
    }),
  });
}

/**
 * Verifies `Stripe-Signature` over the raw body (HMAC-SHA256, 300 s tolerance); throws when it does not hold. Only
 * the signature: parsing is the caller's, so a signed body that is not a well-formed event is told apart from a
 * forged one (the SDK's constructEvent reports both as one thrown error).
 */
export function verifyStripeSignature(payload: string, signature: string, secret: string): void {
  const verifier = loadStripe().webhooks.signature;
  if (!verifier) throw new Error('stripe: the SDK has no webhook signature helper');
  verifier.verifyHeader(payload, signature, secret, STRIPE_WEBHOOK_TOLERANCE_SECONDS);
}

/** A `Stripe-Signature` header for `payload`, as Stripe would sign it (used by the integration self-test). */
export function signStripePayload(payload: string, secret: string): string {
  return loadStripe().webhooks.generateTestHeaderString({ payload, secret });
}

/** Only the loaded SDK makes its errors: before it is loaded, nothing is one. */
export const isStripeError = (error: unknown): error is Stripe.errors.StripeError => stripeSdk !== undefined && error instanceof stripeSdk.errors.StripeError;
