import type { GuardedResponse } from '../../../adapters/outbound/http/guarded-client.ts';
import { OutboundError } from '../../../adapters/outbound/http/outbound-error.ts';
import { ToolError } from '../toolkit.ts';

/** Helpers every provider's toolkit shares: reading answers safely and wording failures for owners and models. */

/** A provider's fixed identifier (PERMISSION_DENIED, VALIDATION_ERROR, channel_not_found): safe to show, unlike its messages. */
export function identifier(value: unknown): string | undefined {
  return typeof value === 'string' && /^[A-Za-z0-9_.-]{1,80}$/.test(value) ? value : undefined;
}

/**
 * The guarded client's failure as a tool error naming the provider; retryable when it was the network. Only the
 * failure's kind: a tool error reaches a visitor's toolCalls, and the client's message names the address it tried
 * (for the HTTP tool, the owner's endpoint).
 */
export function unreachable(provider: string, err: unknown): unknown {
  if (!(err instanceof OutboundError)) return err;
  const retryable = err.kind === 'timeout' || err.kind === 'connection_failed' || err.kind === 'dns_failure';
  const failure = new ToolError(`Could not reach ${provider} (${err.kind.replaceAll('_', ' ')})`, retryable);
  failure.cause = err;
  return failure;
}

/** A JSON object (not an array, not null). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function asObject(value: unknown): Record<string, unknown> | null {
  return isObject(value) ? value : null;
}

/** The answer's JSON object, or null when it is not one. */
export function jsonObject(res: GuardedResponse): Record<string, unknown> | null {
  try {
    return asObject(res.json());
  } catch {
    return null;
  }
}

export function retryAfterSeconds(res: GuardedResponse): number | undefined {
  const header = res.headers['retry-after'];
  const value = Number(Array.isArray(header) ? header[0] : header);
  return header !== undefined && Number.isFinite(value) && value >= 0 ? Math.ceil(value) : undefined;
}

export function requireString(input: Record<string, unknown>, name: string): string {
  const value = input[name];
  if (typeof value !== 'string' || value.trim() === '') throw new ToolError(`${name} is required`);
  return value;
}

export function optionalString(input: Record<string, unknown>, name: string): string | undefined {
  const value = input[name];
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new ToolError(`${name} must be a string`);
  return value;
}

export const trimSlash = (url: string) => url.replace(/\/+$/, '');
