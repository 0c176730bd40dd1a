import { describe, expect, it } from 'vitest';
import { errorText } from './retry-policy.ts';

describe('errorText', () => {
  it("writes what was thrown as storable text: a provider's NUL dropped, a pair split at the cap made U+FFFD", () => {
    expect(errorText(new Error('SMTP send failed: 451 try later \u0000 please'))).toBe('SMTP send failed: 451 try later  please');
    expect(errorText('plain')).toBe('plain');
    expect(errorText({ code: 'E\u0000X' })).toBe('{"code":"E\\u0000X"}');
    const long = errorText(new Error(`${'x'.repeat(3999)}\u{1F600}${'y'.repeat(5000)}`));
    expect(long.includes('\u0000')).toBe(false);
    expect(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(long)).toBe(false);
  });
});
