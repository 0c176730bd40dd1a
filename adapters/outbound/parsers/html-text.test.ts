import { describe, expect, it } from 'vitest';
import { htmlToText } from './html-text.ts';

describe('htmlToText (mammoth output → text)', () => {
  it('puts blocks on lines, list items on lines, table rows on lines with tab-separated cells', () => {
    const html =
      '<h1>T</h1><p>a <strong>b</strong></p><ul><li>one</li><li>two<ul><li>sub</li></ul></li></ul>' +
      '<table><tr><td><p>x</p><p>y</p></td><td><table><tr><td>i1</td><td>i2</td></tr></table></td></tr>' +
      '<tr><th>h</th><td></td></tr></table><p>after &amp; done</p>';
    expect(htmlToText(html)).toBe('T\n\na b\n\none\ntwo\nsub\n\nx y\ti1 i2\nh\n\nafter & done');
  });

  it('reads a long run of unclosed < as text, in linear time', () => {
    // Quadratic before: 30,000 took a second, so this many outlasted the test's timeout.
    const run = 'a<'.repeat(300_000);
    expect(htmlToText(`<p>x</p>${run}`)).toBe(`x\n\n${run}`);
  });
});
