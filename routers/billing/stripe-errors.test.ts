import { describe, expect, it } from 'vitest';
import { OutboundError } from '../../adapters/outbound/http/outbound-error.ts';
import { AppError } from '../../schema/errors.ts';
import { stripeFailure } from './stripe-errors.ts';

describe('stripeFailure', () => {
  it('leaves our own failures alone: they are not the provider’s', () => {
    expect(stripeFailure(new TypeError("Cannot read properties of null (reading 'object')"))).toBeUndefined();
    expect(stripeFailure(new Error('invalid byte sequence for encoding "UTF8": 0x00'))).toBeUndefined();
  });

  it('passes an AppError through', () => {
    const error = new AppError('NOT_FOUND', 'Not found');
    expect(stripeFailure(error)).toBe(error);
  });

  it('maps the outbound client’s failures to the provider’s codes', () => {
    expect(stripeFailure(new OutboundError('timeout', 'no answer'))?.code).toBe('UPSTREAM_TIMEOUT');
    expect(stripeFailure(new OutboundError('connection_failed', 'refused'))?.code).toBe('UPSTREAM_CONNECTION_FAILED');
  });
});
