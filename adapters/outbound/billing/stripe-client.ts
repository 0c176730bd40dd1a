import { createRequire } from 'node:module';
import type Stripe from 'stripe';
import type { GuardedHttpClient } from '../http/guarded-client.ts';

export type { Stripe };

// The SDK is loaded on first use (its CommonJS build, synchronously, ~60 ms once): a service without billing
// configured never pays its memory.
let stripeSdk: typeof Stripe | undefined;
const loadStripe = () => (stripeSdk ??= createRequire(import.meta.url)('stripe') as typeof Stripe);

/** Stripe's documented tolerance for a webhook's signed timestamp. */
export const STRIPE_WEBHOOK_TOLERANCE_SECONDS = 300;

/**
 * The official SDK, with every request sent through the one SSRF-guarded client (a Stripe-compatible server on a
 * private address must be in OUTBOUND_ALLOW_HOSTS, like any other upstream). Two network retries: the SDK sends an
 * idempotency key with every retried POST, and our creates pass their own.
 */
export function createStripeClient(options: { secretKey: string; apiUrl?: string; http: GuardedHttpClient; timeoutMs: number }): Stripe {
  const fetchThroughGuard = async (url: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const response = await options.http.request(String(url), {
      method: init.method ?? 'GET',
      headers,
      body: typeof init.body === 'string' ? init.body : undefined,
      signal: init.signal ?? undefined,
      timeoutMs: options.timeoutMs,
    });
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(response.headers)) {
      for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value]) responseHeaders.append(name, one);
    }
    return new Response(new Uint8Array(response.body), { status: response.status, headers: responseHeaders });
  };
  const target = options.apiUrl ? new URL(options.apiUrl) : undefined;
  const StripeSdk = loadStripe();
  return new StripeSdk(options.secretKey, {
    httpClient: StripeSdk.createFetchHttpClient(fetchThroughGuard),
    maxNetworkRetries: 2,
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
