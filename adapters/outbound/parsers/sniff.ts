import { fileTypeFromBuffer } from 'file-type';
import { readZipDirectory } from './zip.ts';

export type DocumentKind = 'pdf' | 'docx' | 'txt' | 'md';

export type SniffResult = { ok: true; kind: DocumentKind } | { ok: false; reason: string };

/** The kinds of content we can recognise from the bytes alone. */
type Detected =
  | { kind: 'pdf' }
  | { kind: 'docx' }
  | { kind: 'zip'; what: string }
  | { kind: 'binary'; what: string | null }
  | { kind: 'text' }
  | { kind: 'not-utf8'; detail: string }
  | { kind: 'refused-text'; what: string };

function startsWith(bytes: Uint8Array, signature: ArrayLike<number>, offset = 0): boolean {
  if (bytes.length < offset + signature.length) return false;
  for (let i = 0; i < signature.length; i++) if (bytes[offset + i] !== signature[i]) return false;
  return true;
}

function ascii(text: string): number[] {
  return Array.from(text, (c) => c.charCodeAt(0));
}

const PDF_MAGIC = ascii('%PDF-');
const ZIP_MAGIC = [0x50, 0x4b, 0x03, 0x04];
const EMPTY_ZIP_MAGIC = [0x50, 0x4b, 0x05, 0x06];

/** Well-known binary signatures, to say what an unsupported file is. Checked only for bytes that are not UTF-8 text. */
const BINARY_SIGNATURES: Array<{ magic: number[]; offset?: number; what: string }> = [
  { magic: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], what: 'a PNG image' },
  { magic: [0xff, 0xd8, 0xff], what: 'a JPEG image' },
  { magic: ascii('GIF87a'), what: 'a GIF image' },
  { magic: ascii('GIF89a'), what: 'a GIF image' },
  { magic: ascii('WEBP'), offset: 8, what: 'a WebP image' },
  { magic: ascii('WAVE'), offset: 8, what: 'a WAV audio file' },
  { magic: ascii('AVI '), offset: 8, what: 'an AVI video' },
  { magic: [0x49, 0x49, 0x2a, 0x00], what: 'a TIFF image' },
  { magic: [0x4d, 0x4d, 0x00, 0x2a], what: 'a TIFF image' },
  { magic: ascii('BM'), what: 'a BMP image' },
  { magic: [0x00, 0x00, 0x01, 0x00], what: 'an ICO icon' },
  { magic: ascii('8BPS'), what: 'a Photoshop (PSD) image' },
  {
    magic: [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1],
    what: 'a legacy Microsoft Office (OLE/CFB) file such as a .doc, or a password-protected Office document',
  },
  { magic: [0x1f, 0x8b], what: 'a GZIP archive' },
  { magic: [0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c], what: 'a 7-Zip archive' },
  { magic: ascii('Rar!\x1a\x07'), what: 'a RAR archive' },
  { magic: [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00], what: 'an XZ archive' },
  { magic: [0x28, 0xb5, 0x2f, 0xfd], what: 'a Zstandard archive' },
  { magic: ascii('BZh'), what: 'a BZIP2 archive' },
  { magic: ascii('ustar'), offset: 257, what: 'a TAR archive' },
  { magic: [0x7f, 0x45, 0x4c, 0x46], what: 'an ELF executable' },
  { magic: ascii('MZ'), what: 'a Windows executable' },
  { magic: [0x00, 0x61, 0x73, 0x6d], what: 'a WebAssembly module' },
  { magic: ascii('SQLite format 3\0'), what: 'an SQLite database' },
  { magic: ascii('ID3'), what: 'an MP3 audio file' },
  { magic: [0xff, 0xfb], what: 'an MP3 audio file' },
  { magic: ascii('OggS'), what: 'an Ogg audio/video file' },
  { magic: ascii('fLaC'), what: 'a FLAC audio file' },
  { magic: [0x1a, 0x45, 0xdf, 0xa3], what: 'a Matroska/WebM video' },
];

function describeFtyp(bytes: Uint8Array): string | null {
  if (!startsWith(bytes, ascii('ftyp'), 4)) return null;
  const brand = String.fromCharCode(...bytes.subarray(8, 12));
  if (/^(heic|heix|hevc|mif1|msf1)/.test(brand)) return 'a HEIC image';
  if (/^avi[fs]/.test(brand)) return 'an AVIF image';
  if (/^qt/.test(brand)) return 'a QuickTime video';
  if (/^M4A/.test(brand)) return 'an M4A audio file';
  return 'an MP4 video';
}

function describeBinary(bytes: Uint8Array): string | null {
  for (const signature of BINARY_SIGNATURES) {
    if (startsWith(bytes, signature.magic, signature.offset ?? 0)) {
      if (signature.offset === 8 && !startsWith(bytes, ascii('RIFF'))) continue;
      return signature.what;
    }
  }
  return describeFtyp(bytes);
}

/** Names ZIP-based formats that are not Word documents. */
function describeZip(names: string[]): string {
  const has = (prefix: string) => names.some((n) => n.startsWith(prefix));
  if (has('xl/')) return 'an Excel workbook (a ZIP archive that is not a Word document)';
  if (has('ppt/')) return 'a PowerPoint presentation (a ZIP archive that is not a Word document)';
  if (names.includes('mimetype') && has('META-INF/')) {
    return has('OEBPS/') || names.some((n) => n.endsWith('.opf'))
      ? 'an EPUB e-book (a ZIP archive that is not a Word document)'
      : 'an OpenDocument file (a ZIP archive that is not a Word document)';
  }
  return 'a ZIP archive that is not a Word document';
}

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

function isValidUtf8(bytes: Uint8Array): boolean {
  try {
    fatalUtf8.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

function detect(bytes: Uint8Array): Detected {
  if (startsWith(bytes, PDF_MAGIC)) return { kind: 'pdf' };
  if (startsWith(bytes, ZIP_MAGIC) || startsWith(bytes, EMPTY_ZIP_MAGIC)) {
    let names: string[];
    try {
      names = readZipDirectory(bytes).map((e) => e.name);
    } catch {
      return { kind: 'zip', what: 'a damaged ZIP archive' };
    }
    return names.includes('word/document.xml') ? { kind: 'docx' } : { kind: 'zip', what: describeZip(names) };
  }
  const text = isValidUtf8(bytes);
  const hasNul = bytes.indexOf(0) !== -1;
  if (text && !hasNul) {
    if (startsWith(bytes, ascii('{\\rtf')) || startsWith(bytes, [0xef, 0xbb, 0xbf, ...ascii('{\\rtf')])) {
      return { kind: 'refused-text', what: 'an RTF document' };
    }
    return { kind: 'text' };
  }
  // Some PDF producers (and mail gateways) put junk before the header; PDF readers accept it within 1 KiB.
  const head = bytes.subarray(0, 1024);
  for (let i = head.indexOf(0x25); i !== -1 && i <= head.length - PDF_MAGIC.length; i = head.indexOf(0x25, i + 1)) {
    if (startsWith(bytes, PDF_MAGIC, i)) return { kind: 'pdf' };
  }
  const what = describeBinary(bytes);
  if (what) return { kind: 'binary', what };
  if (startsWith(bytes, [0xff, 0xfe]) || startsWith(bytes, [0xfe, 0xff])) {
    return { kind: 'not-utf8', detail: ' (it looks like UTF-16; save it as UTF-8)' };
  }
  if (text && hasNul) return { kind: 'not-utf8', detail: ' (it contains NUL bytes)' };
  return { kind: 'binary', what: null };
}

function extensionOf(fileName: string): string {
  const base = fileName.split(/[\\/]/).pop() ?? '';
  const dot = base.lastIndexOf('.');
  return dot > 0 ? base.slice(dot + 1).toLowerCase() : '';
}

function describeDetected(d: Detected): string {
  switch (d.kind) {
    case 'pdf':
      return 'a PDF';
    case 'docx':
      return 'a ZIP archive (a Word document)';
    case 'zip':
      return d.what;
    case 'binary':
      return d.what ?? 'a binary file of an unrecognised type';
    case 'text':
      return 'plain text';
    case 'not-utf8':
      return 'not valid UTF-8 text';
    case 'refused-text':
      return d.what;
  }
}

/**
 * Decides the kind from the bytes (magic numbers), never from the extension. The extension only chooses
 * md vs txt for valid UTF-8 text. Synchronous: unknown binaries are named from a built-in signature table
 * (the upload uses {@link sniffDocumentKindDetailed}, which asks file-type about the rest).
 */
export function sniffDocumentKind(bytes: Uint8Array, fileName: string): SniffResult {
  const name = fileName || 'the file';
  if (bytes.length === 0) return { ok: false, reason: `${name} is empty` };
  const detected = detect(bytes);
  const ext = extensionOf(fileName);

  if (ext === 'pdf' && detected.kind !== 'pdf') {
    return { ok: false, reason: `${name} is ${describeDetected(detected)}, not a PDF` };
  }
  if (ext === 'docx' && detected.kind !== 'docx') {
    return { ok: false, reason: `${name} is ${describeDetected(detected)}, not a Word document (.docx)` };
  }

  switch (detected.kind) {
    case 'pdf':
      return { ok: true, kind: 'pdf' };
    case 'docx':
      return { ok: true, kind: 'docx' };
    case 'zip':
      return { ok: false, reason: `${name} is ${detected.what}; only PDF, DOCX, Markdown and plain text are supported` };
    case 'binary':
      return detected.what
        ? { ok: false, reason: `${name} is ${detected.what}, not a supported document (PDF, DOCX, Markdown or plain text)` }
        : { ok: false, reason: `${name} is not valid UTF-8 text, and not a PDF or DOCX either` };
    case 'not-utf8':
      return { ok: false, reason: `${name} is not valid UTF-8 text${detected.detail}` };
    case 'refused-text':
      return { ok: false, reason: `${name} is ${detected.what}, not a supported document (PDF, DOCX, Markdown or plain text)` };
    case 'text':
      return { ok: true, kind: ext === 'md' || ext === 'markdown' ? 'md' : 'txt' };
  }
}

/**
 * Same decision as {@link sniffDocumentKind}; when a file is refused as an unrecognised binary, asks
 * file-type (which knows many more formats) to name it.
 */
export async function sniffDocumentKindDetailed(bytes: Uint8Array, fileName: string): Promise<SniffResult> {
  const result = sniffDocumentKind(bytes, fileName);
  if (result.ok || bytes.length === 0) return result;
  const detected = detect(bytes);
  if (detected.kind !== 'binary' || detected.what !== null) return result;
  let type: { ext: string; mime: string } | undefined;
  try {
    type = await fileTypeFromBuffer(bytes);
  } catch {
    return result;
  }
  if (!type) return result;
  const name = fileName || 'the file';
  const what = `a ${type.ext.toUpperCase()} file (${type.mime})`;
  const ext = extensionOf(fileName);
  if (ext === 'pdf') return { ok: false, reason: `${name} is ${what}, not a PDF` };
  if (ext === 'docx') return { ok: false, reason: `${name} is ${what}, not a Word document (.docx)` };
  return { ok: false, reason: `${name} is ${what}, not a supported document (PDF, DOCX, Markdown or plain text)` };
}
