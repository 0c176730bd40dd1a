/**
 * Markdown → plain text, line based with inline regexes (no dependency). Keeps the words and the line
 * structure a reader (and a text splitter) needs: headings on their own line followed by a blank line,
 * list items as lines, links as their text, images as their alt text, code blocks verbatim; drops front
 * matter, emphasis markers, HTML tags and comments, link reference definitions and horizontal rules.
 */

const ENTITIES: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
  ndash: '–',
  mdash: '—',
  hellip: '…',
  copy: '©',
  reg: '®',
  trade: '™',
};

export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z]{2,8});/gi, (whole, body: string) => {
    if (body[0] === '#') {
      const code = body[1] === 'x' || body[1] === 'X' ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10);
      return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : whole;
    }
    return ENTITIES[body.toLowerCase()] ?? whole;
  });
}

// Private-use characters mark where inline code spans were taken out (and are put back), so inline rules never touch them.
const PH_OPEN = '\uE000';
const PH_CLOSE = '\uE001';

/** Converts the inline markup of one line of text. */
export function inlineToText(line: string): string {
  const codes: string[] = [];
  let s = line.replace(/\uE000|\uE001/g, '');
  // Inline code: `code`, ``co`de`` — content kept verbatim. A span opens with a whole run of backticks (as
  // CommonMark's does): tried from every backtick of a long run, the search was cubic in the run's length.
  s = s.replace(/(?<!`)(`+)(?!`)([\s\S]*?[^`])\1(?!`)/g, (_m, _ticks: string, code: string) => {
    codes.push(code.length > 1 && code.startsWith(' ') && code.endsWith(' ') ? code.slice(1, -1) : code);
    return `${PH_OPEN}${codes.length - 1}${PH_CLOSE}`;
  });
  // Backslash escapes: protect the escaped character.
  s = s.replace(/\\([!-/:-@[-`{-~])/g, (_m, ch: string) => {
    codes.push(ch);
    return `${PH_OPEN}${codes.length - 1}${PH_CLOSE}`;
  });
  // HTML comments and tags (an <img alt> keeps its alt text; autolinks keep their address).
  s = s.replace(/<!--[\s\S]*?-->/g, '');
  s = s.replace(/<((?:https?|ftp|mailto):[^\s<>]+)>/gi, '$1');
  s = s.replace(/<([^\s<>@]+@[^\s<>@]+\.[^\s<>@]+)>/g, '$1');
  // Neither the tag nor its alt text runs past another '<': otherwise every unclosed `<img alt="` was searched to the end.
  s = s.replace(/<img\b[^<>]*?\balt\s*=\s*(?:"([^"<>]*)"|'([^'<>]*)')[^<>]*>/gi, (_m, a?: string, b?: string) => a ?? b ?? '');
  s = s.replace(/<br\s*\/?>/gi, ' ');
  s = s.replace(/<\/?[a-z][a-z0-9-]*(?:\s[^<>]*)?\/?>/gi, '');
  // Images → alt text, links → their text (inline, reference and collapsed forms).
  s = s.replace(/!\[([^\]]*)\]\((?:[^()\s]|\([^()]*\))*(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)/g, '$1');
  s = s.replace(/!\[([^\]]*)\]\[[^\]]*\]/g, '$1');
  for (let i = 0; i < 3; i++) {
    // Repeated so a link whose text is an image ([![alt](img)](url)) also collapses.
    s = s.replace(/\[([^\][]*)\]\((?:[^()\s]|\([^()]*\))*(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)/g, '$1');
  }
  s = s.replace(/\[([^\][]+)\]\[[^\]]*\]/g, '$1');
  // Footnote references [^1] go; shortcut reference links [text] stay as text. The label stops at the next '[' (a
  // run of unclosed `[^a` was otherwise searched to the end from each one).
  s = s.replace(/\[\^[^\]\s[]+\]/g, '');
  // Emphasis: ***x***, **x**, *x*, ___x___, __x__, _x_ (underscores only at word boundaries), ~~x~~, ==x==. A span
  // is at most 500 characters: each marker without a closing one was searched to the end of the line, so a
  // long line of them was quadratic. Markers of a longer span stay in the text, which the tokenizer ignores anyway.
  for (let i = 0; i < 3; i++) {
    const before = s;
    s = s.replace(/(\*{1,3})(?=\S)([\s\S]{0,499}?\S)\1(?!\*)/g, '$2');
    s = s.replace(/(^|[^\p{L}\p{N}_])(_{1,3})(?=\S)([\s\S]{0,499}?\S)\2(?![\p{L}\p{N}_])/gu, '$1$3');
    s = s.replace(/~~(?=\S)([\s\S]{0,499}?\S)~~/g, '$1');
    s = s.replace(/==(?=\S)([\s\S]{0,499}?\S)==/g, '$1');
    // Nothing matched: the next passes would not either.
    if (s === before) break;
  }
  s = decodeEntities(s);
  return s.replace(/\uE000(\d+)\uE001/g, (_m, i: string) => codes[Number(i)] ?? '');
}

const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const ATX_HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const SETEXT_UNDERLINE = /^ {0,3}(=+|-+)[ \t]*$/;
const HR = /^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$/;
const LIST_ITEM = /^([ \t]*)(?:[-*+]|\d{1,9}[.)])(?:[ \t]+\[[ xX]\])?(?:[ \t]+(.*))?$/;
const BLOCKQUOTE = /^ {0,3}>[ \t]?/;
const LINK_DEFINITION = /^ {0,3}\[[^\]]+\]:\s*\S+(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*$/;
const TABLE_DELIMITER = /^\s*\|?\s*:?-{1,}:?\s*(?:\|\s*:?-{1,}:?\s*)+\|?\s*$/;
const HTML_BLOCK_LINE = /^\s*<\/?[a-z][a-z0-9-]*(?:\s[^<>]*)?\/?>\s*$/i;

/** Removes a leading front matter block (YAML `---` … `---`/`...`, or TOML `+++` … `+++`). */
function dropFrontMatter(lines: string[]): string[] {
  const first = lines[0]?.trimEnd();
  if (first !== '---' && first !== '+++') return lines;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!.trimEnd();
    if (line === first || (first === '---' && line === '...')) return lines.slice(i + 1);
  }
  return lines; // never closed: it was not front matter (perhaps a horizontal rule)
}

function tableRow(line: string): string {
  let row = line.trim();
  if (row.startsWith('|')) row = row.slice(1);
  if (row.endsWith('|') && !row.endsWith('\\|')) row = row.slice(0, -1);
  return row
    .split(/(?<!\\)\|/)
    .map((cell) => inlineToText(cell.trim().replace(/\\\|/g, '|')))
    .join('\t');
}

export function markdownToText(markdown: string): string {
  const lines = dropFrontMatter(markdown.replace(/\r\n?/g, '\n').split('\n'));
  const out: string[] = [];
  const blank = () => {
    if (out.length > 0 && out[out.length - 1] !== '') out.push('');
  };
  let fence: { marker: string; indent: number } | null = null;
  let inComment = false;
  let paragraph: string[] = [];
  const flushParagraph = () => {
    // One push per line: spreading a paragraph of some hundred thousand lines into push overflows the stack.
    for (const line of paragraph) out.push(line);
    paragraph = [];
  };

  for (let index = 0; index < lines.length; index++) {
    const raw = lines[index]!;
    if (fence) {
      const close = raw.match(/^ {0,3}(`{3,}|~{3,})[ \t]*$/);
      if (close && close[1]![0] === fence.marker[0] && close[1]!.length >= fence.marker.length) {
        fence = null;
        blank();
        continue;
      }
      // Code is kept verbatim, minus the fence's own indentation.
      out.push(raw.replace(new RegExp(`^ {0,${fence.indent}}`), ''));
      continue;
    }
    if (inComment) {
      const end = raw.indexOf('-->');
      if (end === -1) continue;
      inComment = false;
      const rest = raw.slice(end + 3);
      if (rest.trim() === '') continue;
      lines[index] = rest;
      index--;
      continue;
    }

    // Block quotes: drop the markers and treat the rest as ordinary lines.
    let line = raw;
    while (BLOCKQUOTE.test(line)) line = line.replace(BLOCKQUOTE, '');

    const fenceOpen = line.match(FENCE);
    if (fenceOpen && !(fenceOpen[1]![0] === '`' && fenceOpen[2]!.includes('`'))) {
      flushParagraph();
      blank();
      fence = { marker: fenceOpen[1]!, indent: line.length - line.trimStart().length };
      continue;
    }
    const commentStart = line.indexOf('<!--');
    if (commentStart !== -1 && line.indexOf('-->', commentStart + 4) === -1) {
      inComment = true;
      line = line.slice(0, commentStart);
      if (line.trim() === '') continue;
    }

    if (line.trim() === '') {
      flushParagraph();
      blank();
      continue;
    }
    // Indented code block (only where it cannot be a paragraph continuation or a nested list line).
    if (/^( {4}|\t)/.test(line) && paragraph.length === 0 && !LIST_ITEM.test(line)) {
      const prev = out[out.length - 1];
      if (prev === undefined || prev === '') {
        out.push(line.replace(/^( {4}|\t)/, ''));
        continue;
      }
    }
    const heading = line.match(ATX_HEADING);
    if (heading) {
      flushParagraph();
      blank();
      const text = inlineToText((heading[2] ?? '').trim());
      if (text) out.push(text, '');
      continue;
    }
    if (paragraph.length > 0 && SETEXT_UNDERLINE.test(line)) {
      // The paragraph's lines were a setext heading.
      const text = paragraph.join(' ').trim();
      paragraph = [];
      blank();
      if (text) out.push(text, '');
      continue;
    }
    if (HR.test(line)) {
      flushParagraph();
      blank();
      continue;
    }
    if (LINK_DEFINITION.test(line)) continue;
    if (/^ {0,3}\[\^[^\]]+\]:\s*/.test(line)) {
      // Footnote definition: keep its text as a line.
      flushParagraph();
      out.push(inlineToText(line.replace(/^ {0,3}\[\^[^\]]+\]:\s*/, '').trim()));
      continue;
    }
    if (line.includes('|') && TABLE_DELIMITER.test(lines[index + 1] ?? '')) {
      flushParagraph();
      out.push(tableRow(line));
      index++; // skip the delimiter row
      while (index + 1 < lines.length && lines[index + 1]!.includes('|') && lines[index + 1]!.trim() !== '') {
        index++;
        out.push(tableRow(lines[index]!));
      }
      blank();
      continue;
    }
    const item = line.match(LIST_ITEM);
    if (item) {
      flushParagraph();
      const text = inlineToText((item[2] ?? '').trim());
      if (text) out.push(text);
      continue;
    }
    if (HTML_BLOCK_LINE.test(line)) {
      // A line that is only a tag (<div>, </details>, <br/>…): nothing to keep.
      const text = inlineToText(line).trim();
      if (text) paragraph.push(text);
      continue;
    }
    const text = inlineToText(line.trim().replace(/ {2,}$/, ''));
    if (text.trim()) paragraph.push(text);
  }
  flushParagraph();
  return out
    .join('\n')
    .replace(/[ \t]+$/gm, '')
    .replace(/\n{3,}/g, '\n\n')
    .replace(/^\n+|\n+$/g, '');
}
