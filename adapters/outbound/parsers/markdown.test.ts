import { describe, expect, it } from 'vitest';
import { markdownToText } from './markdown.ts';

describe('markdownToText', () => {
  it('keeps headings as their own lines followed by a blank line', () => {
    expect(markdownToText('# Title\nIntro text.\n## Section ##\nBody.')).toBe('Title\n\nIntro text.\n\nSection\n\nBody.');
    expect(markdownToText('Setext Title\n===\n\nText')).toBe('Setext Title\n\nText');
  });

  it('turns links into their text and images into their alt text', () => {
    expect(markdownToText('See [the docs](https://example.com/a_(b) "Docs") and ![a cat](cat.png).')).toBe('See the docs and a cat.');
    expect(markdownToText('Ref [link][1] and <https://example.com>.\n\n[1]: https://example.com')).toBe('Ref link and https://example.com.');
    expect(markdownToText('[![badge](b.svg)](https://ci)')).toBe('badge');
  });

  it('keeps code blocks verbatim and inline code content', () => {
    const md = 'Use `npm **install**` now.\n\n```js\nconst a = 1; // *not emphasis*\nif (a < 2) {}\n```\n\nAfter.';
    expect(markdownToText(md)).toBe('Use npm **install** now.\n\nconst a = 1; // *not emphasis*\nif (a < 2) {}\n\nAfter.');
    expect(markdownToText('Para.\n\n    indented code\n\nNext.')).toBe('Para.\n\nindented code\n\nNext.');
  });

  it('strips emphasis markers but not underscores inside words or lone asterisks', () => {
    expect(markdownToText('**bold**, *it*, ***both***, __b2__, _i2_, ~~gone~~ and snake_case_name, 2 * 3 * 4')).toBe(
      'bold, it, both, b2, i2, gone and snake_case_name, 2 * 3 * 4',
    );
    expect(markdownToText('Escaped \\*stars\\* stay')).toBe('Escaped *stars* stay');
  });

  it('drops front matter, HTML tags and comments', () => {
    const md =
      '---\ntitle: Secret title\ndate: 2024-01-01\n---\n\n<div align="center">\n<b>Hi</b> there &amp; more<!-- hidden -->\n</div>\n<!--\nmulti\nline\n-->\nEnd';
    const text = markdownToText(md);
    expect(text).not.toMatch(/Secret|date:|hidden|multi|<|>/);
    expect(text).toBe('Hi there & more\nEnd');
  });

  it('keeps list items and table rows as lines, drops quote markers and rules', () => {
    const md = '- one\n- two *x*\n  1. nested\n- [ ] task\n\n> quoted\n> text\n\n---\n\n| A | B |\n|---|:-:|\n| 1 | 2 |';
    expect(markdownToText(md)).toBe('one\ntwo x\nnested\ntask\n\nquoted\ntext\n\nA\tB\n1\t2');
  });

  it('keeps a paragraph of hundreds of thousands of lines whole', () => {
    const lines = Array.from({ length: 300_000 }, (_, i) => `word${i}`);
    const text = markdownToText(lines.join('\n'));
    expect(text.split('\n')).toEqual(lines);
  });
});
