import MarkdownIt from 'markdown-it';
import type { Token } from 'markdown-it';
import { decodeEntities, htmlToText } from './html-text.ts';

/**
 * Markdown → plain text through markdown-it's token stream (CommonMark, plus GFM tables and strikethrough). Keeps
 * the words and the line structure a reader (and a text splitter) needs: headings on their own line followed by a
 * blank line, list items and table rows (cells separated by tabs) as lines, links as their text, images as their
 * alt text, code verbatim, raw HTML as its text; drops front matter, emphasis markers, tags, comments, scripts,
 * styles, link reference definitions and horizontal rules.
 *
 * Raw HTML is parsed (html: true) only so that its text is kept and its tags are not: nothing here is rendered.
 * markdown-it stops at 100 levels of nesting and drops everything after that point, so each line's container prefix
 * (indentation, `>` and list markers) is first cut to MAX_PREFIX_COLUMNS: a list level takes at least two columns
 * and a quote one, which keeps any document under the bound. Lines of top-level fenced code are left alone.
 */
const parser = new MarkdownIt('default', { html: true, linkify: false, typographer: false });

const TASK_BOX = /^\[[ xX]\][ \t]+/;
const IMG_TAG = /<img\b[^<>]*>/gi;
const IMG_ALT = /\balt\s*=\s*(?:"([^"]*)"|'([^']*)')/i;
// An unclosed script or style runs to the end of its block, as in a browser; `$` (not the next opening tag) ends
// the search, so a block of a thousand unclosed `<script` tags is read once.
const SCRIPT_OR_STYLE = /<(script|style)\b[\s\S]*?(?:<\/\1\s*>|$)/gi;
const COMMENT = /<!--[\s\S]*?(?:-->|$)/g;
const TAG = /<\/?[a-zA-Z][^<>]*>/g;
const SCRIPT_OR_STYLE_OPEN = /^<(script|style)\b/i;
const SCRIPT_OR_STYLE_CLOSE = /^<\/(script|style)\b/i;
const MAX_PREFIX_COLUMNS = 60;
const CONTAINER_PREFIX = /^(?:[ \t]|>|[-*+](?=[ \t]|$)|\d{1,9}[.)](?=[ \t]|$))+/;
const FENCE = /^ {0,3}(`{3,}|~{3,})/;

/** A line's container prefix, tabs expanded, cut to MAX_PREFIX_COLUMNS (see the file comment). */
function capPrefix(line: string): string {
  const prefix = line.match(CONTAINER_PREFIX)?.[0];
  if (!prefix || (prefix.length <= MAX_PREFIX_COLUMNS && !prefix.includes('\t'))) return line;
  let expanded = '';
  for (const ch of prefix) expanded += ch === '\t' ? ' '.repeat(4 - (expanded.length % 4)) : ch;
  if (expanded.length <= MAX_PREFIX_COLUMNS) return expanded + line.slice(prefix.length);
  return `${expanded.slice(0, MAX_PREFIX_COLUMNS).trimEnd()} ${line.slice(prefix.length)}`;
}

function capNesting(source: string): string {
  const lines = source.split('\n');
  let fence: string | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const marker = line.match(FENCE)?.[1];
    if (fence !== null) {
      if (marker && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) fence = null;
      continue;
    }
    if (marker && !(marker[0] === '`' && line.slice(line.indexOf(marker) + marker.length).includes('`'))) {
      fence = marker;
      continue;
    }
    lines[i] = capPrefix(line);
  }
  return lines.join('\n');
}

/** Removes a leading front matter block (YAML `---` … `---`/`...`, or TOML `+++` … `+++`). */
function dropFrontMatter(text: string): string {
  const lines = text.split('\n');
  const first = lines[0]?.trimEnd();
  if (first !== '---' && first !== '+++') return text;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!.trimEnd();
    if (line === first || (first === '---' && line === '...')) return lines.slice(i + 1).join('\n');
  }
  return text; // never closed: it was not front matter (perhaps a horizontal rule)
}

/** An inline token's children as text: line breaks kept, markup dropped, inline scripts and styles skipped. */
function inlineText(children: Token[] | null): string {
  let text = '';
  let inScript = false;
  for (const token of children ?? []) {
    if (inScript) {
      if (token.type === 'html_inline' && SCRIPT_OR_STYLE_CLOSE.test(token.content)) inScript = false;
      continue;
    }
    switch (token.type) {
      case 'text':
      case 'code_inline':
        text += token.content;
        break;
      case 'softbreak':
      case 'hardbreak':
        text += '\n';
        break;
      case 'image':
        text += inlineText(token.children);
        break;
      case 'html_inline': {
        if (SCRIPT_OR_STYLE_OPEN.test(token.content)) inScript = true;
        else if (/^<br\b/i.test(token.content)) text += ' ';
        else if (/^<img\b/i.test(token.content)) text += altText(token.content);
        break;
      }
    }
  }
  return text;
}

function altText(tag: string): string {
  const alt = tag.match(IMG_ALT);
  return alt?.[1] ?? alt?.[2] ?? '';
}

/** A raw HTML block's text: comments, scripts and styles dropped, images as their alt text, `<pre>` lines kept. */
function htmlBlockText(html: string): string {
  const cleaned = html
    .replace(COMMENT, '')
    .replace(SCRIPT_OR_STYLE, '')
    .replace(IMG_TAG, (tag) => ` ${altText(tag)} `);
  if (/^\s*<pre\b/i.test(cleaned)) return decodeEntities(cleaned.replace(TAG, ''));
  return htmlToText(cleaned);
}

export function markdownToText(markdown: string): string {
  const tokens = parser.parse(capNesting(dropFrontMatter(markdown.replace(/\r\n?/g, '\n'))), {});
  const out: string[] = [];
  const blank = () => {
    if (out.length > 0 && out[out.length - 1] !== '') out.push('');
  };
  /** Pushed one by one: a spread of a 100,000-line code block would overflow the stack. */
  const lines = (text: string, keepBlank = false) => {
    for (const line of text.split('\n')) if (keepBlank || line.trim() !== '') out.push(line);
  };
  let lists = 0;
  let row: string[] | null = null;
  let cell: string | null = null;
  let heading = false;
  let itemStart = false;

  for (const token of tokens) {
    switch (token.type) {
      case 'heading_open':
        blank();
        heading = true;
        break;
      case 'heading_close':
        heading = false;
        blank();
        break;
      case 'paragraph_close':
      case 'blockquote_close':
      case 'hr':
        if (lists === 0) blank();
        break;
      case 'bullet_list_open':
      case 'ordered_list_open':
        lists++;
        break;
      case 'bullet_list_close':
      case 'ordered_list_close':
        lists--;
        if (lists === 0) blank();
        break;
      case 'list_item_open':
        itemStart = true;
        break;
      case 'tr_open':
        row = [];
        break;
      case 'th_open':
      case 'td_open':
        cell = '';
        break;
      case 'th_close':
      case 'td_close':
        row?.push(cell ?? '');
        cell = null;
        break;
      case 'tr_close':
        if (row) out.push(row.join('\t'));
        row = null;
        break;
      case 'table_close':
        blank();
        break;
      case 'fence':
      case 'code_block':
        blank();
        lines(token.content.replace(/\n$/, ''), true);
        blank();
        break;
      case 'html_block':
        lines(htmlBlockText(token.content), true);
        blank();
        break;
      case 'inline': {
        let text = inlineText(token.children);
        if (itemStart) text = text.replace(TASK_BOX, '');
        itemStart = false;
        if (cell !== null) cell += text.replace(/\s*\n\s*/g, ' ').trim();
        else if (heading) lines(text.replace(/\s*\n\s*/g, ' ').trim());
        else lines(text);
        break;
      }
    }
  }
  return out
    .join('\n')
    .replace(/[ \t]+$/gm, '')
    .replace(/\n{3,}/g, '\n\n')
    .replace(/^\n+|\n+$/g, '');
}
