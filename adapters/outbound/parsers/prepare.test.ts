import { PDFDocument, StandardFonts } from 'pdf-lib';
import { describe, expect, it } from 'vitest';
import { extractDocument } from './extract.ts';
import { ParseError } from './parse-error.ts';
import { prepareDocument, splitPages } from './prepare.ts';

const options = { chunkSize: 200, chunkOverlap: 20, maxCharacters: 1_000_000, maxChunks: 1_000 };

async function pdf(pages: string[]): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (const text of pages) doc.addPage([595, 842]).drawText(text, { x: 50, y: 780, size: 10, font });
  return doc.save();
}

const reasonOf = (promise: Promise<unknown>) =>
  promise.then(
    () => expect.unreachable('should have failed'),
    (error: unknown) => {
      expect(error).toBeInstanceOf(ParseError);
      return (error as ParseError).reason;
    },
  );

describe('prepareDocument', () => {
  it('gives the chunks that extraction then splitting give, each with its page', async () => {
    const bytes = await pdf(['first page words '.repeat(30), 'second page words '.repeat(30)]);
    const prepared = await prepareDocument('pdf', bytes, options);
    expect(prepared.pageCount).toBe(2);
    expect(prepared.chunks).toEqual(await splitPages((await extractDocument('pdf', bytes)).pages, 200, 20));
    expect(new Set(prepared.chunks.map((c) => c.page))).toEqual(new Set([1, 2]));
    expect(prepared.chunks.map((c) => c.index)).toEqual(prepared.chunks.map((_, i) => i));
  });

  it('fails with a reason past its character and chunk limits, and on a document without text', async () => {
    const text = new TextEncoder().encode('word '.repeat(2_000));
    expect(await reasonOf(prepareDocument('txt', text, { ...options, maxCharacters: 100 }))).toMatch(/more than 100 characters/);
    expect(await reasonOf(prepareDocument('txt', text, { ...options, maxChunks: 3 }))).toMatch(/more than the 3 allowed/);
    expect(await reasonOf(prepareDocument('txt', new TextEncoder().encode('   \n '), options))).toBe('The document contains no text');
  });
});
