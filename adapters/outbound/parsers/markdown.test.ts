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

  it('opens inline code only with a whole run of backticks, as CommonMark does', () => {
    expect(markdownToText('use `` a`b `` here')).toBe('use a`b here');
    expect(markdownToText('````c` stays')).toBe('````c` stays');
    expect(markdownToText('x ``y`` and `z`')).toBe('x y and z');
  });

  // Each of these lines took from tens of seconds to minutes: markers without a closing one were searched to the
  // end of the line from every one of them.
  it('reads long lines of unclosed markers in one pass', () => {
    const lines = [
      `x${'`'.repeat(5_000)}`,
      `x ${'<img alt="'.repeat(5_000)}`,
      `x ${'_a '.repeat(40_000)}`,
      `x ${'*a '.repeat(40_000)}`,
      `x ${'[^a'.repeat(40_000)}`,
    ];
    for (const line of lines) expect(markdownToText(line).startsWith('x')).toBe(true);
  });

  it('leaves the markers of an emphasis longer than 500 characters in place', () => {
    const long = 'w '.repeat(300).trim();
    expect(markdownToText(`*${long}*`)).toBe(`*${long}*`);
    expect(markdownToText(`**short** and _${'v '.repeat(10).trim()}_`)).toBe(`short and ${'v '.repeat(10).trim()}`);
  });
});
