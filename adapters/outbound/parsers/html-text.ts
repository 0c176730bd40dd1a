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

const MARKUP = /(<\/?[a-zA-Z][^<>]*>|<!--[\s\S]*?(?:-->|$)|<[!?][a-zA-Z?][^<>]*>)/;

/** Numeric references and the common named entities; anything else stays as written. */
export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z]{2,8});/gi, (whole, body: string) => {
    if (body[0] === '#') {
      const code = body[1] === 'x' || body[1] === 'X' ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10);
      return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : whole;
    }
    return ENTITIES[body.toLowerCase()] ?? whole;
  });
}

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

  // Split keeps the captured markup at odd indexes. A tag starts with a letter and cannot contain another `<`, and an
  // unclosed comment runs to the end: each `<` is looked at once, so hostile HTML stays linear, and a `<` that opens
  // no tag ("a < b") is text.
  const tokens = html.split(MARKUP);
  for (let index = 0; index < tokens.length; index++) {
    const token = tokens[index]!;
    if (!token) continue;
    if (index % 2 === 0) {
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
