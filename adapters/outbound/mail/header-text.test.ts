import { describe, expect, it } from 'vitest';
import { headerText } from './header-text.ts';

describe('headerText', () => {
  it('folds each run of CR, LF, tabs and other control characters to one space', () => {
    expect(headerText('Hi\r\nBcc: x@example.com')).toBe('Hi Bcc: x@example.com');
    expect(headerText('Mallory\n\n\r\n\tBcc: victim@example.com')).toBe('Mallory Bcc: victim@example.com');
    expect(headerText('a\rb\nc\td\u0000e\u001bf\u007fg')).toBe('a b c d e f g');
  });

  it('trims what folding leaves at the ends, and keeps ordinary text as it is', () => {
    expect(headerText('\r\nSubject\r\n')).toBe('Subject');
    expect(headerText('Zoë Visitor, Mo 1 März 2027 (Europe/Berlin)')).toBe('Zoë Visitor, Mo 1 März 2027 (Europe/Berlin)');
    expect(headerText('two  spaces')).toBe('two  spaces');
  });

  it('leaves nothing the mailer refuses in a header', () => {
    const hostile = ['\r', '\n', '\u0000', '\r\n', 'x\r\n.\r\nRCPT TO:<y@example.com>'];
    for (const text of hostile) expect(headerText(text)).not.toMatch(/[\r\n\0]/);
  });
});
