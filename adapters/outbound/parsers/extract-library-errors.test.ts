/**
 * Library failures no real file reliably provokes (pdf.js failing past its structure check, a bug of ours), with
 * the libraries replaced so their messages are known: none of those messages may reach the owner's reason.
 */
import { strToU8 } from 'fflate';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { extractDocument } from './extract.ts';
import { ParseError } from './parse-error.ts';

const failures = vi.hoisted(() => ({ open: null as Error | null, text: null as Error | null, markdown: null as Error | null }));

vi.mock('unpdf', async (importOriginal) => {
  const real = await importOriginal<typeof import('unpdf')>();
  return {
    ...real,
    getDocumentProxy: (...args: Parameters<typeof real.getDocumentProxy>) => (failures.open ? Promise.reject(failures.open) : real.getDocumentProxy(...args)),
    extractText: (...args: Parameters<typeof real.extractText>) => (failures.text ? Promise.reject(failures.text) : real.extractText(...args)),
  };
});
vi.mock('./markdown.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('./markdown.ts')>();
  return {
    ...real,
    markdownToText: (text: string) => {
      if (failures.markdown) throw failures.markdown;
      return real.markdownToText(text);
    },
  };
});

afterEach(() => {
  failures.open = null;
  failures.text = null;
  failures.markdown = null;
});

function named(name: string, message: string): Error {
  const error = new Error(message);
  error.name = name;
  return error;
}

async function reasonOf(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => {
      throw new Error('expected a ParseError, but parsing succeeded');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ParseError);
  return (error as ParseError).reason;
}

const PDF = strToU8('%PDF-1.7\n');

describe("a library's message never becomes the owner's reason", () => {
  it('pdf.js failing to open the file for a reason other than its structure or a password', async () => {
    failures.open = named('UnknownErrorException', 'Bad FCHECK in flate stream: 120, 255');
    expect(await reasonOf(extractDocument('pdf', PDF))).toBe('The PDF could not be opened: it is damaged or uses a feature that is not supported');
  });

  it("pdf.js failing while it reads the pages' text", async () => {
    failures.text = new TypeError("Cannot read properties of undefined (reading 'fnArray')");
    // A PDF the real pdf.js opens, so the failure is the text extraction's.
    const reason = await reasonOf(extractDocument('pdf', await minimalPdf()));
    expect(reason).toBe("The PDF's text could not be read: the file is damaged or stores its text in a way that is not supported");
  });

  it('an unexpected error of ours while converting a document', async () => {
    failures.markdown = new RangeError('Maximum call stack size exceeded');
    expect(await reasonOf(extractDocument('md', strToU8('# Title')))).toBe('The document could not be read because of an unexpected error while parsing it');
  });
});

async function minimalPdf(): Promise<Uint8Array> {
  const { PDFDocument } = await import('pdf-lib');
  const pdf = await PDFDocument.create();
  pdf.addPage([200, 200]);
  return pdf.save();
}
