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
    // The HTML block ends at </div>: what follows starts a block of its own.
    expect(text).toBe('Hi there & more\n\nEnd');
  });

  it('keeps the text of raw HTML, not its scripts, styles or tags; an inline image keeps its alt text', () => {
    const md =
      '<details>\n<summary>More</summary>\n<script>alert(1)</script><style>p{}</style>\nHidden text\n</details>\n\nA<br>B and <img src="x.png" alt="logo"> <span>c</span>';
    const text = markdownToText(md);
    expect(text).not.toMatch(/alert|p\{|<|>/);
    expect(text).toMatch(/More/);
    expect(text).toMatch(/Hidden text/);
    expect(text.split('\n').at(-1)).toBe('A B and logo c');
  });

  it('keeps inline text in table cells and loose list items as lines', () => {
    expect(markdownToText('| **A** | [b](u) |\n|---|---|\n| `x` | y |')).toBe('A\tb\nx\ty');
    expect(markdownToText('- one\n\n- two\n\nAfter')).toBe('one\ntwo\n\nAfter');
  });

  it('reads hostile nesting as text and keeps what follows it', () => {
    expect(markdownToText(`${'>'.repeat(5_000)} deep`)).toMatch(/deep$/);
    const list = Array.from({ length: 60 }, (_, i) => `${'    '.repeat(i)}- dir${i}`).join('\n');
    const nested = markdownToText(`Intro.\n\n${list}\n\n## Next section\n\nImportant text.`);
    expect(nested).toMatch(/dir59/);
    expect(nested).toMatch(/Next section\n\nImportant text\.$/);
    expect(markdownToText(`${'> - '.repeat(40)}word\n\nAfter`)).toMatch(/word\n\nAfter$/);
    // Code keeps its lines as written, however they start.
    expect(markdownToText(`\`\`\`\n${'>'.repeat(30)}\n\`\`\``)).toBe('>'.repeat(30));
  });

  it('keeps a code block of 200,000 lines and unclosed markup as text', () => {
    expect(markdownToText(`\`\`\`\n${'x\n'.repeat(200_000)}\`\`\``).split('\n')).toHaveLength(200_000);
    expect(markdownToText(`${'*'.repeat(50_000)}a`)).toMatch(/a$/);
    expect(markdownToText(`${'['.repeat(50_000)}b`)).toMatch(/b$/);
  });

  it('keeps the words of an HTML block: comparisons, image alt text, preformatted lines; drops comments', () => {
    expect(markdownToText('<div>\nif a < b and c > d then, <3\n</div>')).toBe('if a < b and c > d then, <3');
    expect(markdownToText('<p align="center">\n  <img src="logo.png" alt="Project logo">\n</p>\n\nText')).toBe('Project logo\n\nText');
    expect(markdownToText('<pre>\nline one\nline two &amp; three\n\nline four\n</pre>')).toBe('line one\nline two & three\n\nline four');
    expect(markdownToText('<!-- <img src="x.png"> -->\n\nText')).toBe('Text');
    expect(markdownToText('Para\n\n<!--\n<div>old stuff</div>\n-->\nText')).toBe('Para\n\nText');
    expect(markdownToText('<div>\nkept <!-- never closed\n\nlost')).toBe('kept\n\nlost');
  });

  it('drops scripts and styles inline and in blocks, closed or not', () => {
    expect(markdownToText('Para <script>alert(1)</script> and <style>p{}</style>end')).toMatch(/^Para\s+and\s+end$/);
    expect(markdownToText('Before\n\n<script>\nvar secret = 1;\n\nText')).toBe('Before');
  });
});
