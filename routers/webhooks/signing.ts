import { createHmac, randomBytes } from 'node:crypto';
import { AppError } from '../../schema/errors.ts';

/**
 * The Standard Webhooks signing scheme (https://www.standardwebhooks.com): the signed content is
 * `<webhook-id>.<webhook-timestamp>.<body>`, signed with HMAC-SHA256 under the base64-decoded part of a
 * `whsec_` secret, and sent as `v1,<base64>`; several signatures (secret rotation) are separated by spaces.
 */
const PREFIX = 'whsec_';
const MIN_SECRET_BYTES = 24;
const MAX_SECRET_BYTES = 64;
const GENERATED_SECRET_BYTES = 32;

export const generateSecret = () => PREFIX + randomBytes(GENERATED_SECRET_BYTES).toString('base64');

/** The key bytes of a `whsec_` secret, or undefined when it is not one of the accepted form. */
function secretKey(secret: string): Buffer | undefined {
  if (!secret.startsWith(PREFIX)) return undefined;
  const encoded = secret.slice(PREFIX.length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || encoded.length % 4 !== 0) return undefined;
  return Buffer.from(encoded, 'base64');
}

/** Validates an owner-supplied secret (400 with the reason otherwise). */
export function assertValidSecret(secret: string): void {
  const key = secretKey(secret);
  if (!key) throw new AppError('VALIDATION_FAILED', 'Invalid webhook secret', "secret: must be 'whsec_' followed by standard base64");
  if (key.length < MIN_SECRET_BYTES)
    throw new AppError(
      'VALIDATION_FAILED',
      'Webhook secret too short',
      `secret: must encode at least ${MIN_SECRET_BYTES} random bytes (it encodes ${key.length})`,
    );
  if (key.length > MAX_SECRET_BYTES)
    throw new AppError('VALIDATION_FAILED', 'Webhook secret too long', `secret: must encode at most ${MAX_SECRET_BYTES} bytes`);
}

export function signatureHeader(secrets: string[], webhookId: string, timestampSeconds: number, body: string): string {
  return secrets
    .map((secret) => {
      const key = secretKey(secret);
      if (!key) throw new Error('stored webhook secret is malformed');
      return 'v1,' + createHmac('sha256', key).update(`${webhookId}.${timestampSeconds}.${body}`).digest('base64');
    })
    .join(' ');
}
