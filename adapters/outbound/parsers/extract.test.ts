import { AlignmentType, Document, HeadingLevel, Packer, Paragraph, Table, TableCell, TableRow } from 'docx';
import { strToU8, zipSync } from 'fflate';
import { PDFDocument, rgb, StandardFonts } from 'pdf-lib';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_ZIP_LIMITS, extractDocument } from './extract.ts';
import { ParseError } from './parse-error.ts';

async function pdfWithPages(pages: string[][]): Promise<Uint8Array> {
  const pdf = await PDFDocument.create();
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  for (const lines of pages) {
    const page = pdf.addPage([595, 842]);
    lines.forEach((line, i) => page.drawText(line, { x: 50, y: 780 - i * 20, size: 12, font }));
  }
  return pdf.save();
}

async function docxWithTable(): Promise<Uint8Array> {
  const cell = (text: string) => new TableCell({ children: [new Paragraph(text)] });
  const doc = new Document({
    sections: [
      {
        children: [
          new Paragraph({ text: 'Annual Summary', heading: HeadingLevel.HEADING_1 }),
          new Paragraph('First paragraph about the year.'),
          new Paragraph({ text: 'Second paragraph with more detail.', alignment: AlignmentType.LEFT }),
          new Table({
            rows: [
              new TableRow({ children: [cell('Alpha'), cell('Bravo'), cell('Charlie')] }),
              new TableRow({ children: [cell('Delta'), cell('Echo'), cell('Foxtrot')] }),
            ],
          }),
        ],
      },
    ],
  });
  return new Uint8Array(await Packer.toBuffer(doc));
}

async function expectParseError(promise: Promise<unknown>, pattern: RegExp): Promise<ParseError> {
  const error = await promise.then(
    () => {
      throw new Error('expected a ParseError, but parsing succeeded');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ParseError);
  expect((error as ParseError).reason).toMatch(pattern);
  return error as ParseError;
}

describe('extractDocument: PDF', () => {
  it('returns one page per PDF page, with 1-based numbers and the text of that page', async () => {
    const bytes = await pdfWithPages([
      ['First page says hello', 'and continues   here.'],
      ['Second page talks about pricing.'],
      ['Third page is the conclusion.'],
    ]);
    const doc = await extractDocument('pdf', bytes);
    expect(doc.kind).toBe('pdf');
    expect(doc.pageCount).toBe(3);
    expect(doc.pages.map((p) => p.page)).toEqual([1, 2, 3]);
    expect(doc.pages[0]!.text).toContain('First page says hello');
    expect(doc.pages[0]!.text).toContain('and continues here.'); // whitespace normalised
    expect(doc.pages[0]!.text).not.toContain('pricing');
    expect(doc.pages[1]!.text).toBe('Second page talks about pricing.');
    expect(doc.pages[2]!.text).toBe('Third page is the conclusion.');
    expect(doc.characters).toBe(doc.pages.reduce((n, p) => n + p.text.length, 0));
  });

  it('refuses a PDF without a text layer', async () => {
    const pdf = await PDFDocument.create();
    pdf.addPage([595, 842]).drawRectangle({ x: 50, y: 50, width: 200, height: 100, color: rgb(0.2, 0.4, 0.8) });
    await expectParseError(extractDocument('pdf', await pdf.save()), /no text layer/);
  });

  it('refuses a corrupt PDF', async () => {
    const junk = new Uint8Array(4096);
    for (let i = 0; i < junk.length; i++) junk[i] = (i * 7919 + 13) % 251;
    const bytes = new Uint8Array([...new TextEncoder().encode('%PDF-1.7\n'), ...junk]);
    await expectParseError(extractDocument('pdf', bytes), /PDF/);
  });

  it('refuses bytes that are not a PDF at all', async () => {
    await expectParseError(extractDocument('pdf', strToU8('just some text')), /PDF/);
  });
});

describe('extractDocument: DOCX', () => {
  it('keeps the heading, paragraphs and every table cell, one table row per line', async () => {
    const doc = await extractDocument('docx', await docxWithTable());
    expect(doc.kind).toBe('docx');
    expect(doc.pageCount).toBeNull();
    expect(doc.pages).toHaveLength(1);
    const text = doc.pages[0]!.text;
    expect(text.split('\n')[0]).toBe('Annual Summary');
    expect(text).toContain('First paragraph about the year.');
    expect(text).toContain('Second paragraph with more detail.');
    for (const cell of ['Alpha', 'Bravo', 'Charlie', 'Delta', 'Echo', 'Foxtrot']) expect(text).toContain(cell);
    const lines = text.split('\n');
    expect(lines).toContain('Alpha\tBravo\tCharlie');
    expect(lines).toContain('Delta\tEcho\tFoxtrot');
    expect(doc.characters).toBe(text.length);
  });

  it('refuses a document with no text', async () => {
    const empty = new Document({ sections: [{ children: [new Paragraph('')] }] });
    await expectParseError(extractDocument('docx', new Uint8Array(await Packer.toBuffer(empty))), /contains no text/);
  });

  it('refuses a damaged archive and a zip without word/document.xml', async () => {
    const docx = await docxWithTable();
    await expectParseError(extractDocument('docx', docx.subarray(0, docx.length - 200)), /DOCX/);
    await expectParseError(extractDocument('docx', zipSync({ 'a.txt': strToU8('hello') })), /not a Word document/);
  });

  describe('zip bomb', () => {
    let bomb: Uint8Array;
    beforeAll(() => {
      // 300 MB of zeros deflated at level 9 → a few hundred KB.
      const zeros = new Uint8Array(300 * 1024 * 1024);
      bomb = zipSync({
        '[Content_Types].xml': strToU8('<Types/>'),
        'word/document.xml': strToU8('<w:document><w:body><w:p><w:r><w:t>hi</w:t></w:r></w:p></w:body></w:document>'),
        'word/media/zeros.bin': [zeros, { level: 9 }],
      });
    }, 60_000);

    it('is refused without inflating it into memory', async () => {
      expect(bomb.length).toBeLessThan(1024 * 1024);
      const rssBefore = process.memoryUsage.rss();
      // The check yields to the event loop while inflating, so a sampler sees the RSS along the way.
      let peak = rssBefore;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 2);
      const started = performance.now();
      try {
        await expectParseError(extractDocument('docx', bomb), /zip bomb/);
      } finally {
        clearInterval(sampler);
      }
      const elapsed = performance.now() - started;
      const rssAfter = process.memoryUsage.rss();
      peak = Math.max(peak, rssAfter);
      console.info(
        `zip bomb (${(bomb.length / 1024).toFixed(0)} KiB → 300 MiB): refused in ${elapsed.toFixed(0)} ms, ` +
          `RSS +${((rssAfter - rssBefore) / 1048576).toFixed(1)} MiB after, +${((peak - rssBefore) / 1048576).toFixed(1)} MiB at peak`,
      );
      expect(rssAfter - rssBefore).toBeLessThan(150 * 1024 * 1024);
      expect(peak - rssBefore).toBeLessThan(150 * 1024 * 1024);
    });

    it('is refused by the total size limit when the ratio limit is out of the way', async () => {
      await expectParseError(
        extractDocument('docx', bomb, { zipLimits: { ...DEFAULT_ZIP_LIMITS, maxRatio: Number.POSITIVE_INFINITY } }),
        /zip bomb: it inflates to more than 200 MiB/,
      );
    });

    it('is refused by the ratio limit', async () => {
      await expectParseError(
        extractDocument('docx', bomb, {
          zipLimits: { ...DEFAULT_ZIP_LIMITS, maxTotalInflatedBytes: Number.POSITIVE_INFINITY },
        }),
        /zip bomb: it inflates to more than 200 times its size/,
      );
    });

    it('stops when the signal aborts', async () => {
      const controller = new AbortController();
      controller.abort();
      await expectParseError(extractDocument('docx', bomb, { signal: controller.signal }), /cancelled/);
    });
  });

  it('refuses an encrypted entry and an entry whose local header is missing', async () => {
    const zip = zipSync({ 'word/document.xml': strToU8('<w:document/>') });
    const view = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
    const eocd = zip.length - 22;
    const central = view.getUint32(eocd + 16, true);
    const encrypted = zip.slice();
    new DataView(encrypted.buffer).setUint16(central + 8, 1, true);
    await expectParseError(extractDocument('docx', encrypted), /encrypted/);
    const moved = zip.slice();
    new DataView(moved.buffer).setUint32(central + 42, 5, true);
    await expectParseError(extractDocument('docx', moved), /damaged ZIP/);
  });

  it('refuses a zip with 5000 tiny entries', async () => {
    const files: Record<string, Uint8Array> = { 'word/document.xml': strToU8('<w:document/>') };
    for (let i = 0; i < 5000; i++) files[`word/media/f${i}.txt`] = strToU8('x');
    await expectParseError(extractDocument('docx', zipSync(files)), /zip bomb: it has 5001 entries/);
  });

  it('accepts a real document under tighter custom limits, refuses it when they are exceeded', async () => {
    const docx = await docxWithTable();
    await expect(extractDocument('docx', docx, { zipLimits: { maxEntries: 50, maxTotalInflatedBytes: 10_000_000, maxRatio: 50 } })).resolves.toMatchObject({
      kind: 'docx',
      pageCount: null,
    });
    await expectParseError(
      extractDocument('docx', docx, { zipLimits: { maxEntries: 3, maxTotalInflatedBytes: 10_000_000, maxRatio: 50 } }),
      /zip bomb: it has \d+ entries \(the limit is 3\)/,
    );
  });
});

describe("extractDocument: a parser library's failure reads as a fixed reason", () => {
  const W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"';
  const CONTENT_TYPES =
    '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/></Types>';
  const TEXT = `<w:document ${W}><w:body><w:p><w:r><w:t>Hello</w:t></w:r></w:p></w:body></w:document>`;
  const docx = (parts: Record<string, string>) =>
    zipSync(Object.fromEntries(Object.entries({ '[Content_Types].xml': CONTENT_TYPES, ...parts }).map(([name, xml]) => [name, strToU8(xml)])));
  const XML_REASON = 'The DOCX is damaged: its text (word/document.xml) or another of its parts is not valid XML';

  /** Nothing of the library shows: no name, no "[xmldom error]" marker, no tab, no nested "Error:". */
  async function expectReason(promise: Promise<unknown>, reason: string): Promise<void> {
    const error = await expectParseError(promise, /./);
    expect(error.reason).toBe(reason);
    for (const leak of ['xmldom', '[', '\t', '\n', 'Error:']) expect(error.reason).not.toContain(leak);
  }

  it('a word/document.xml with two root elements', async () => {
    await expectReason(extractDocument('docx', docx({ 'word/document.xml': `${TEXT}<w:document ${W}/>` })), XML_REASON);
  });

  it('a word/document.xml using an undefined entity', async () => {
    const entity = `<w:document ${W}><w:body><w:p><w:r><w:t>a &e; b</w:t></w:r></w:p></w:body></w:document>`;
    await expectReason(extractDocument('docx', docx({ 'word/document.xml': entity })), XML_REASON);
  });

  it('another part (the styles) that is not valid XML', async () => {
    await expectReason(extractDocument('docx', docx({ 'word/document.xml': TEXT, 'word/styles.xml': '<w:styles>&q;</w:styles>' })), XML_REASON);
  });

  it('a word/document.xml that is not XML at all (mammoth fails with a TypeError)', async () => {
    await expectReason(
      extractDocument('docx', docx({ 'word/document.xml': 'plain words, no markup' })),
      'The DOCX is damaged or not a Word document: its content could not be read',
    );
  });

  it("an entry the inflater rejects, named without fflate's words or the control characters of its name", async () => {
    const zip = zipSync({ 'word/\tdocument.xml': [strToU8(TEXT.repeat(50)), { level: 9 }], 'word/document.xml': strToU8(TEXT) });
    const broken = zip.slice();
    // The first entry's deflate stream starts after its 30-byte local header and 19-byte name.
    broken.fill(0xff, 30 + 19, 30 + 19 + 16);
    await expectReason(extractDocument('docx', broken), 'The DOCX is a damaged ZIP archive: "word/ document.xml" cannot be decompressed');
  });

  it("a file that is not a PDF at all, without pdf.js's own words", async () => {
    await expectReason(extractDocument('pdf', strToU8('just some text')), 'The PDF is damaged or not a valid PDF');
  });
});

describe('extractDocument: text', () => {
  it('decodes UTF-8, strips the BOM and normalises CRLF', async () => {
    const bytes = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode('Café line one\r\nline two\rline three')]);
    const doc = await extractDocument('txt', bytes);
    expect(doc).toEqual({
      kind: 'txt',
      pages: [{ page: null, text: 'Café line one\nline two\nline three' }],
      pageCount: null,
      characters: 'Café line one\nline two\nline three'.length,
    });
  });

  it('refuses invalid UTF-8, empty and whitespace-only text', async () => {
    await expectParseError(extractDocument('txt', new Uint8Array([0x41, 0xe9, 0x42])), /not valid UTF-8/);
    await expectParseError(extractDocument('txt', new Uint8Array()), /empty/);
    await expectParseError(extractDocument('md', strToU8('  \n\n ')), /no text/);
  });

  it('converts Markdown to text', async () => {
    const doc = await extractDocument('md', strToU8('# Title\n\nSome *text*.'));
    expect(doc.pages[0]!.text).toBe('Title\n\nSome text.');
  });

  it('only ever throws ParseError, whatever the bytes', async () => {
    const garbage = new Uint8Array(2048).map((_, i) => (i * 31 + 7) % 256);
    for (const kind of ['pdf', 'docx', 'txt', 'md'] as const) {
      await expect(extractDocument(kind, garbage)).rejects.toBeInstanceOf(ParseError);
    }
    await expect(extractDocument('docx', new Uint8Array([0x50, 0x4b, 0x03, 0x04, 1, 2, 3]))).rejects.toBeInstanceOf(ParseError);
  });
});
