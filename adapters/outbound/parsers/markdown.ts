import MarkdownIt from 'markdown-it';
import type { Token } from 'markdown-it';
import { htmlToText } from './html-text.ts';

/**
 * Markdown → plain text through markdown-it's token stream (CommonMark, plus GFM tables and strikethrough). Keeps
 * the words and the line structure a reader (and a text splitter) needs: headings on their own line followed by a
 * blank line, list items and table rows (cells separated by tabs) as lines, links as their text, images as their
 * alt text, code verbatim, raw HTML as its text; drops front matter, emphasis markers, tags, comments, scripts,
 * link reference definitions and horizontal rules.
 *
 * Raw HTML is parsed (html: true) only so that its text is kept and its tags are not: nothing here is rendered.
 * markdown-it bounds nesting (maxNesting, 100 levels) and drops what lies deeper, so quote markers beyond
 * MAX_QUOTE_DEPTH are merged first: a hostile document of five thousand nested quotes keeps its words. Lists nested
 * more than about thirty deep lose their deepest items. Pathological inputs some parts of markdown-it are slow on
 * (a line of a hundred thousand `[`) are bounded by the parsing worker's deadline, like every document.
 */
const parser = new MarkdownIt('default', { html: true, linkify: false, typographer: false });

const TASK_BOX = /^\[[ xX]\][ \t]+/;
const IMG_ALT = /\balt\s*=\s*(?:"([^"]*)"|'([^']*)')/i;
const SCRIPT_OR_STYLE = /<(script|style|template)\b[\s\S]*?<\/\1\s*>/gi;
const MAX_QUOTE_DEPTH = 20;
const DEEP_QUOTE = new RegExp(`^(?:[ \\t]*>){${MAX_QUOTE_DEPTH + 1},}`, 'gm');

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

/** An inline token's children as text: line breaks kept, markup dropped. */
function inlineText(children: Token[] | null): string {
  let text = '';
  for (const token of children ?? []) {
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
        if (/^<br\b/i.test(token.content)) text += ' ';
        else if (/^<img\b/i.test(token.content)) {
          const alt = token.content.match(IMG_ALT);
          text += alt?.[1] ?? alt?.[2] ?? '';
        }
        break;
      }
    }
  }
  return text;
}

export function markdownToText(markdown: string): string {
  const source = dropFrontMatter(markdown.replace(/\r\n?/g, '\n')).replace(DEEP_QUOTE, '>'.repeat(MAX_QUOTE_DEPTH));
  const tokens = parser.parse(source, {});
  const out: string[] = [];
  const blank = () => {
    if (out.length > 0 && out[out.length - 1] !== '') out.push('');
  };
  const lines = (text: string) => {
    for (const line of text.split('\n')) if (line.trim() !== '') out.push(line);
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
        out.push(...token.content.replace(/\n$/, '').split('\n'));
        blank();
        break;
      case 'html_block': {
        const text = htmlToText(token.content.replace(SCRIPT_OR_STYLE, ''));
        if (text) out.push(...text.split('\n'));
        blank();
        break;
      }
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
