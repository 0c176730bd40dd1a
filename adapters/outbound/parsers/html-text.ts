import { decodeEntities } from './markdown.ts';

/**
 * Turns the simple, well-formed HTML that mammoth produces into plain text: paragraphs and headings as
 * blocks separated by a blank line, list items on their own lines, each table row on its own line with its
 * cells separated by tabs (a cell's paragraphs joined by spaces; nested tables flattened into the cell).
 */
export function htmlToText(html: string): string {
  const out: string[] = [];
  let line = '';
  /** Open table cells; text inside a cell goes to the innermost one. */
  const cells: string[][] = [];
  /** Cells of the rows being built, one array per open row (nested tables nest rows). */
  const rows: string[][] = [];

  const append = (text: string) => {
    if (!text) return;
    const cell = cells[cells.length - 1];
    if (cell) cell.push(text);
    else line += text;
  };
  const endLine = (blankAfter: boolean) => {
    const text = line.replace(/[ \t]+/g, ' ').trim();
    line = '';
    if (text) out.push(text);
    if (blankAfter && out.length > 0 && out[out.length - 1] !== '') out.push('');
  };
  /** A block boundary: inside a cell a space, elsewhere a new line. */
  const boundary = (blankAfter: boolean) => {
    const cell = cells[cells.length - 1];
    if (cell) cell.push(' ');
    else endLine(blankAfter);
  };

  // A tag holds no '<' (mammoth escapes it in text and attributes): stopping there keeps the split linear on a
  // run of unclosed '<', which `[^>]*` searched to the end from each one.
  const tokens = html.split(/(<[^<>]*>)/);
  for (const token of tokens) {
    if (!token) continue;
    if (token[0] !== '<') {
      append(decodeEntities(token.replace(/\s+/g, ' ')));
      continue;
    }
    const m = token.match(/^<(\/?)([a-zA-Z0-9]+)/);
    if (!m) continue;
    const closing = m[1] === '/';
    const tag = m[2]!.toLowerCase();
    switch (tag) {
      case 'p':
      case 'div':
      case 'blockquote':
      case 'pre':
        boundary(closing);
        break;
      case 'h1':
      case 'h2':
      case 'h3':
      case 'h4':
      case 'h5':
      case 'h6':
        if (cells.length === 0 && !closing) endLine(true);
        boundary(closing);
        break;
      case 'li':
        boundary(false);
        break;
      case 'ul':
      case 'ol':
        if (cells.length > 0) append(' ');
        else endLine(closing);
        break;
      case 'br':
        if (cells.length > 0) append(' ');
        else endLine(false);
        break;
      case 'table':
        if (closing) {
          if (cells.length === 0 && rows.length === 0 && out.length > 0 && out[out.length - 1] !== '') out.push('');
        } else if (cells.length > 0) {
          append(' ');
        } else {
          endLine(true);
        }
        break;
      case 'tr':
        if (!closing) {
          rows.push([]);
        } else {
          const row = rows.pop() ?? [];
          const text = row
            .map((c) => c.replace(/\s+/g, ' ').trim())
            .join('\t')
            .replace(/^\t+|\t+$/g, '');
          const cell = cells[cells.length - 1];
          if (cell)
            cell.push(
              ` ${row
                .map((c) => c.trim())
                .filter(Boolean)
                .join(' ')} `,
            );
          else if (text.trim()) out.push(text);
        }
        break;
      case 'td':
      case 'th':
        if (!closing) {
          cells.push([]);
        } else {
          const cell = cells.pop() ?? [];
          const row = rows[rows.length - 1];
          const text = cell.join('');
          if (row) row.push(text);
          else append(` ${text} `);
        }
        break;
      default:
        // Inline markup (strong, em, a, sup, …) and images carry no separators.
        break;
    }
  }
  endLine(false);
  return out
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .replace(/^\n+|\n+$/g, '');
}
