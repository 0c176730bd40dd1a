import mammoth from 'mammoth';
import { extractText, getDocumentProxy } from 'unpdf';
import { htmlToText } from './html-text.ts';
import { ParseError } from './parse-error.ts';
import { markdownToText } from './markdown.ts';
import type { DocumentKind } from './sniff.ts';
import { checkZipLimits, DEFAULT_ZIP_LIMITS, type ZipLimits } from './zip.ts';

export type { DocumentKind } from './sniff.ts';
export { DEFAULT_ZIP_LIMITS, type ZipLimits } from './zip.ts';

export interface ExtractedPage {
  /** 1-based for PDF, null otherwise. */
  page: number | null;
  text: string;
}

export interface ExtractedDocument {
  kind: DocumentKind;
  pages: ExtractedPage[];
  pageCount: number | null;
  characters: number;
}

export interface ExtractOptions {
  zipLimits?: ZipLimits;
  signal?: AbortSignal;
}

/** Below this many non-whitespace characters a PDF is considered to have no text layer. */
const MIN_PDF_TEXT = 20;

const CANCELLED = 'Parsing was cancelled';

function checkSignal(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new ParseError(CANCELLED, { cause: signal.reason });
}

/** Rejects as soon as the signal aborts (the work itself is cleaned up by the caller's finally). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new ParseError(CANCELLED, { cause: signal.reason }));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

function nonWhitespaceLength(text: string): number {
  return text.replace(/\s+/g, '').length;
}

/**
 * What an owner reads when a parser library fails. The libraries' own messages (xmldom's tab-separated
 * "[xmldom error]" lines, pdf.js exception text, mammoth's TypeErrors) name our internals and say nothing an owner
 * can act on, so each failure maps to a fixed sentence; the library's message stays in the ParseError's `detail`, for the log.
 */
const PARSER_FAILURES = {
  pdfInvalid: 'The PDF is damaged or not a valid PDF',
  pdfUnopenable: 'The PDF could not be opened: it is damaged or uses a feature that is not supported',
  pdfText: "The PDF's text could not be read: the file is damaged or stores its text in a way that is not supported",
  docxZip: 'The DOCX is not a readable ZIP archive',
  docxXml: 'The DOCX is damaged: its text (word/document.xml) or another of its parts is not valid XML',
  docxUnreadable: 'The DOCX is damaged or not a Word document: its content could not be read',
  unexpected: 'The document could not be read because of an unexpected error while parsing it',
} as const;

/**
 * Mammoth's failures by kind. xmldom's report does not say which part it was parsing (mammoth reads the
 * relationships, styles, numbering and notes before the text), so the XML reason names the likeliest one.
 */
function docxFailure(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  // mammoth rethrows xmldom's report as "<level>: [xmldom <level>]\t<message>…" for any XML part.
  if (text.includes('[xmldom ')) return PARSER_FAILURES.docxXml;
  return PARSER_FAILURES.docxUnreadable;
}

/** Collapses runs of blanks, trims lines, keeps at most one blank line, drops control characters. */
export function normaliseWhitespace(text: string, options: { keepTabs?: boolean } = {}): string {
  const cleaned = text.replace(/\r\n?/g, '\n').replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f\ufffe\uffff]/g, '');
  const collapsed = options.keepTabs
    ? cleaned
        .replace(/[^\S\n\t]+/g, ' ')
        .replace(/ *\t[ \t]*/g, '\t')
        .replace(/^\t+|\t+$/gm, '')
    : cleaned.replace(/[^\S\n]+/g, ' ');
  return collapsed
    .replace(/ ?\n ?/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

function document(kind: DocumentKind, pages: ExtractedPage[], pageCount: number | null): ExtractedDocument {
  return { kind, pages, pageCount, characters: pages.reduce((sum, p) => sum + p.text.length, 0) };
}

async function extractPdf(bytes: Uint8Array, signal: AbortSignal | undefined): Promise<ExtractedDocument> {
  type Proxy = Awaited<ReturnType<typeof getDocumentProxy>>;
  let pdf: Proxy | undefined;
  try {
    // pdf.js may transfer (detach) the buffer it is given: hand it a copy.
    const loading = getDocumentProxy(new Uint8Array(bytes), { verbosity: 0, stopAtErrors: false });
    try {
      pdf = await abortable(loading, signal);
    } catch (error) {
      if (error instanceof ParseError) {
        loading.then((p) => p.destroy()).catch(() => {});
        throw error;
      }
      throw pdfOpenError(error);
    }
    checkSignal(signal);
    if (pdf.numPages < 1) throw new ParseError('The PDF has no pages');
    let texts: string[];
    try {
      ({ text: texts } = await abortable(extractText(pdf, { mergePages: false }), signal));
    } catch (error) {
      if (error instanceof ParseError) throw error;
      throw new ParseError(PARSER_FAILURES.pdfText, { cause: error });
    }
    checkSignal(signal);
    const pages = texts.map((text, i) => ({ page: i + 1, text: normaliseWhitespace(text) }));
    const meaningful = pages.reduce((sum, p) => sum + nonWhitespaceLength(p.text), 0);
    if (meaningful < MIN_PDF_TEXT) {
      throw new ParseError('The PDF has no text layer (it looks scanned or empty); text recognition (OCR) is not supported');
    }
    return document('pdf', pages, pdf.numPages);
  } finally {
    if (pdf) await pdf.destroy().catch(() => {});
  }
}

function pdfOpenError(error: unknown): ParseError {
  const name = error instanceof Error ? error.name : '';
  if (name === 'PasswordException') {
    return new ParseError('The PDF is encrypted (password-protected); remove the password and upload it again', {
      cause: error,
    });
  }
  if (name === 'InvalidPDFException') return new ParseError(PARSER_FAILURES.pdfInvalid, { cause: error });
  return new ParseError(PARSER_FAILURES.pdfUnopenable, { cause: error });
}

async function extractDocx(bytes: Uint8Array, limits: ZipLimits, signal: AbortSignal | undefined): Promise<ExtractedDocument> {
  let check: Awaited<ReturnType<typeof checkZipLimits>>;
  try {
    check = await checkZipLimits(bytes, limits, signal);
  } catch (error) {
    if (signal?.aborted) throw new ParseError(CANCELLED, { cause: signal.reason });
    throw new ParseError(PARSER_FAILURES.docxZip, { cause: error });
  }
  if (!check.ok) {
    throw new ParseError(check.bomb ? `The DOCX looks like a zip bomb: ${check.reason}` : check.reason);
  }
  if (!check.entries.some((e) => e.name === 'word/document.xml')) {
    throw new ParseError('The file is a ZIP archive but not a Word document (word/document.xml is missing)');
  }
  checkSignal(signal);
  let html: string;
  try {
    const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const result = await abortable(
      mammoth.convertToHtml(
        { buffer },
        {
          externalFileAccess: false,
          ignoreEmptyParagraphs: true,
          // Never read or embed image data: only text matters here.
          convertImage: mammoth.images.imgElement(() => Promise.resolve({ src: '' })),
        },
      ),
      signal,
    );
    html = result.value;
  } catch (error) {
    if (error instanceof ParseError) throw error;
    throw new ParseError(docxFailure(error), { cause: error });
  }
  checkSignal(signal);
  const text = normaliseWhitespace(htmlToText(html), { keepTabs: true });
  if (nonWhitespaceLength(text) === 0) throw new ParseError('The document contains no text');
  return document('docx', [{ page: null, text }], null);
}

function decodeUtf8(bytes: Uint8Array): string {
  try {
    // The default decoder (ignoreBOM: false) strips a leading UTF-8 BOM.
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (error) {
    throw new ParseError('The file is not valid UTF-8 text', { cause: error });
  }
}

function extractText_(kind: 'txt' | 'md', bytes: Uint8Array): ExtractedDocument {
  const decoded = decodeUtf8(bytes).replace(/\r\n?/g, '\n');
  if (decoded.includes('\u0000')) throw new ParseError('The file is not valid UTF-8 text (it contains NUL bytes)');
  const text = kind === 'md' ? markdownToText(decoded) : decoded;
  if (nonWhitespaceLength(text) === 0) throw new ParseError('The document contains no text');
  return document(kind, [{ page: null, text }], null);
}

/**
 * Turns a document's bytes into text. Never throws anything but {@link ParseError} (cancellation included).
 */
export async function extractDocument(kind: DocumentKind, bytes: Uint8Array, options: ExtractOptions = {}): Promise<ExtractedDocument> {
  const { signal, zipLimits = DEFAULT_ZIP_LIMITS } = options;
  try {
    checkSignal(signal);
    if (bytes.length === 0) throw new ParseError('The file is empty');
    switch (kind) {
      case 'pdf':
        return await extractPdf(bytes, signal);
      case 'docx':
        return await extractDocx(bytes, zipLimits, signal);
      case 'txt':
      case 'md':
        return extractText_(kind, bytes);
      default:
        throw new ParseError(`Unsupported document kind: ${String(kind)}`);
    }
  } catch (error) {
    if (error instanceof ParseError) throw error;
    throw new ParseError(PARSER_FAILURES.unexpected, { cause: error });
  }
}
