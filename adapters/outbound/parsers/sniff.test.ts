import { Document, Packer, Paragraph } from 'docx';
import { strToU8, zipSync } from 'fflate';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import { beforeAll, describe, expect, it } from 'vitest';
import { sniffDocumentKind, sniffDocumentKindDetailed } from './sniff.ts';

const PNG = new Uint8Array([
  0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06,
  0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0d,
  0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
]);
const CFB = new Uint8Array([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1, ...new Uint8Array(504)]);

function refusal(result: ReturnType<typeof sniffDocumentKind>): string {
  if (result.ok) throw new Error(`expected a refusal, got kind ${result.kind}`);
  return result.reason;
}

describe('sniffDocumentKind', () => {
  let pdf: Uint8Array;
  let docx: Uint8Array;
  beforeAll(async () => {
    const doc = await PDFDocument.create();
    const font = await doc.embedFont(StandardFonts.Helvetica);
    doc.addPage().drawText('hello', { x: 50, y: 700, font });
    pdf = await doc.save();
    docx = new Uint8Array(await Packer.toBuffer(new Document({ sections: [{ children: [new Paragraph('Hello')] }] })));
  });

  it('recognises a PDF and a DOCX from their bytes, whatever their name', () => {
    expect(sniffDocumentKind(pdf, 'report.pdf')).toEqual({ ok: true, kind: 'pdf' });
    expect(sniffDocumentKind(pdf, 'no-extension')).toEqual({ ok: true, kind: 'pdf' });
    expect(sniffDocumentKind(docx, 'letter.docx')).toEqual({ ok: true, kind: 'docx' });
    expect(sniffDocumentKind(docx, 'letter.bin')).toEqual({ ok: true, kind: 'docx' });
  });

  it('refuses a .pdf that is really a DOCX, saying what it is', () => {
    const reason = refusal(sniffDocumentKind(docx, 'report.pdf'));
    expect(reason).toMatch(/ZIP/);
    expect(reason).toMatch(/Word/);
    expect(reason).toMatch(/not a PDF/);
  });

  it('refuses a .docx that is something else, saying what it is', () => {
    expect(refusal(sniffDocumentKind(pdf, 'letter.docx'))).toMatch(/letter\.docx is a PDF, not a Word document/);
    expect(refusal(sniffDocumentKind(CFB, 'old.docx'))).toMatch(/legacy Microsoft Office/);
    expect(refusal(sniffDocumentKind(strToU8('hello'), 'letter.docx'))).toMatch(/plain text, not a Word document/);
    expect(refusal(sniffDocumentKind(strToU8('hello'), 'paper.pdf'))).toMatch(/plain text, not a PDF/);
  });

  it('refuses other binary types, naming them', () => {
    expect(refusal(sniffDocumentKind(PNG, 'notes.txt'))).toMatch(/PNG/);
    expect(refusal(sniffDocumentKind(new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]), 'a.md'))).toMatch(/JPEG/);
    expect(refusal(sniffDocumentKind(new Uint8Array([...strToU8('GIF89a'), 1, 0, 1, 0, 0x80, 0]), 'a.txt'))).toMatch(/GIF/);
    expect(refusal(sniffDocumentKind(CFB, 'old.doc'))).toMatch(/legacy Microsoft Office .*\.doc/);
  });

  it('refuses a ZIP that is not a Word document', () => {
    const zip = zipSync({ 'a.txt': strToU8('hello'), 'b/c.txt': strToU8('world') });
    expect(refusal(sniffDocumentKind(zip, 'archive.zip'))).toMatch(/a ZIP archive that is not a Word document/);
    const xlsx = zipSync({ '[Content_Types].xml': strToU8('<Types/>'), 'xl/workbook.xml': strToU8('<workbook/>') });
    expect(refusal(sniffDocumentKind(xlsx, 'book.xlsx'))).toMatch(/Excel workbook/);
    expect(refusal(sniffDocumentKind(new Uint8Array([0x50, 0x4b, 0x03, 0x04, 9, 9, 9]), 'x.zip'))).toMatch(/damaged ZIP/);
  });

  it('refuses text that is not valid UTF-8 or has NUL bytes', () => {
    expect(refusal(sniffDocumentKind(new Uint8Array([0x63, 0x61, 0x66, 0xe9]), 'latin1.txt'))).toMatch(/not valid UTF-8/);
    expect(refusal(sniffDocumentKind(new Uint8Array([0xe9]), 'latin1.txt'))).toMatch(/not valid UTF-8/);
    expect(refusal(sniffDocumentKind(new Uint8Array([0x61, 0x00, 0x62]), 'nul.txt'))).toMatch(/not valid UTF-8/);
    expect(refusal(sniffDocumentKind(new Uint8Array([0xff, 0xfe, 0x61, 0x00]), 'utf16.txt'))).toMatch(/not valid UTF-8.*UTF-16/);
  });

  it('accepts UTF-8 text (with or without a BOM); the extension picks md or txt', () => {
    const bom = new Uint8Array([0xef, 0xbb, 0xbf, ...strToU8('Café')]);
    expect(sniffDocumentKind(bom, 'notes.txt')).toEqual({ ok: true, kind: 'txt' });
    expect(sniffDocumentKind(strToU8('# Title\n'), 'README.md')).toEqual({ ok: true, kind: 'md' });
    expect(sniffDocumentKind(strToU8('# Title\n'), 'Guide.MARKDOWN')).toEqual({ ok: true, kind: 'md' });
    expect(sniffDocumentKind(strToU8('# Title\n'), 'notes')).toEqual({ ok: true, kind: 'txt' });
    expect(sniffDocumentKind(strToU8('BM is just the start of this sentence'), 'x.txt')).toEqual({ ok: true, kind: 'txt' });
  });

  it('refuses an empty file', () => {
    expect(refusal(sniffDocumentKind(new Uint8Array(), 'empty.txt'))).toMatch(/empty/);
  });
});

describe('sniffDocumentKindDetailed', () => {
  it('agrees with sniffDocumentKind, and asks file-type to name binaries the table does not know', async () => {
    expect(await sniffDocumentKindDetailed(strToU8('hello'), 'a.md')).toEqual({ ok: true, kind: 'md' });
    // A Windows bitmap icon cursor (.cur) is not in the built-in table.
    const cur = new Uint8Array([0x00, 0x00, 0x02, 0x00, 0x01, 0x00, 0x20, 0x20, ...new Uint8Array(40).fill(0xff)]);
    expect(refusal(sniffDocumentKind(cur, 'a.txt'))).toMatch(/not valid UTF-8/);
    expect(refusal(await sniffDocumentKindDetailed(cur, 'a.txt'))).toMatch(/CUR/);
  });
});
