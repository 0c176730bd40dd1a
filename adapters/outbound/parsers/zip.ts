import { Inflate } from 'fflate';

/**
 * A minimal, defensive reader of a ZIP archive's central directory, plus a streaming "how big does this
 * really get" check. It reads the archive the same way JSZip (used by mammoth) does: entries come from the
 * central directory, each entry's data starts after its local header, and its compressed length is the
 * central directory's. Anything inconsistent is reported as a damaged archive (fail closed).
 */

export interface ZipEntry {
  name: string;
  /** General purpose bit flags (bit 0: encrypted). */
  flags: number;
  /** 0 = stored, 8 = deflate. */
  compression: number;
  /** As declared by the archive (never trusted for limits). */
  compressedSize: number;
  declaredSize: number;
  localHeaderOffset: number;
}

export class ZipFormatError extends Error {
  override name = 'ZipFormatError';
}

const SIG_LOCAL = 0x04034b50;
const SIG_CENTRAL = 0x02014b50;
const SIG_EOCD = 0x06054b50;
const SIG_ZIP64_LOCATOR = 0x07064b50;
const SIG_ZIP64_EOCD = 0x06064b50;

function u16(b: Uint8Array, i: number): number {
  return (b[i] ?? 0) | ((b[i + 1] ?? 0) << 8);
}
function u32(b: Uint8Array, i: number): number {
  return ((b[i] ?? 0) | ((b[i + 1] ?? 0) << 8) | ((b[i + 2] ?? 0) << 16) | ((b[i + 3] ?? 0) << 24)) >>> 0;
}
function u64(b: Uint8Array, i: number): number {
  const value = u32(b, i) + u32(b, i + 4) * 0x1_0000_0000;
  if (!Number.isSafeInteger(value)) throw new ZipFormatError('a ZIP64 size or offset is out of range');
  return value;
}

const utf8 = new TextDecoder('utf-8');
const latin1 = new TextDecoder('latin1');

/** Finds the end-of-central-directory record (it may be followed by a comment of up to 64 KiB). */
function findEocd(bytes: Uint8Array): number {
  const last = bytes.length - 22;
  const first = Math.max(0, last - 0xffff);
  for (let i = last; i >= first; i--) {
    if (bytes[i] === 0x50 && u32(bytes, i) === SIG_EOCD) return i;
  }
  return -1;
}

/** Lists the entries of the central directory without inflating anything. */
export function readZipDirectory(bytes: Uint8Array): ZipEntry[] {
  if (bytes.length < 22) throw new ZipFormatError('the archive is truncated');
  const eocd = findEocd(bytes);
  if (eocd < 0) throw new ZipFormatError('the end of the ZIP directory is missing (truncated or damaged archive)');
  let count = u16(bytes, eocd + 10);
  let cdSize = u32(bytes, eocd + 12);
  let cdOffset = u32(bytes, eocd + 16);
  if (count === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) {
    const locator = eocd - 20;
    if (locator >= 0 && u32(bytes, locator) === SIG_ZIP64_LOCATOR) {
      const z64 = u64(bytes, locator + 8);
      if (z64 + 56 > bytes.length || u32(bytes, z64) !== SIG_ZIP64_EOCD) {
        throw new ZipFormatError('the ZIP64 directory record is damaged');
      }
      count = u64(bytes, z64 + 32);
      cdSize = u64(bytes, z64 + 40);
      cdOffset = u64(bytes, z64 + 48);
    }
  }
  if (cdOffset + cdSize > bytes.length) throw new ZipFormatError('the ZIP directory points outside the file');
  // Each central record is at least 46 bytes: a lying count cannot make us loop beyond the file.
  if (count * 46 > cdSize) throw new ZipFormatError('the ZIP directory is shorter than its entry count says');

  const entries: ZipEntry[] = [];
  let p = cdOffset;
  for (let n = 0; n < count; n++) {
    if (p + 46 > cdOffset + cdSize || u32(bytes, p) !== SIG_CENTRAL) {
      throw new ZipFormatError('the ZIP directory is damaged');
    }
    const flags = u16(bytes, p + 8);
    const compression = u16(bytes, p + 10);
    let compressedSize = u32(bytes, p + 20);
    let declaredSize = u32(bytes, p + 24);
    const nameLength = u16(bytes, p + 28);
    const extraLength = u16(bytes, p + 30);
    const commentLength = u16(bytes, p + 32);
    let localHeaderOffset = u32(bytes, p + 42);
    const nameBytes = bytes.subarray(p + 46, p + 46 + nameLength);
    const name = (flags & 0x800 ? utf8 : latin1).decode(nameBytes);
    // ZIP64 extended information: present only for the fields that overflowed, in this order.
    let e = p + 46 + nameLength;
    const extraEnd = e + extraLength;
    while (e + 4 <= extraEnd) {
      const id = u16(bytes, e);
      const size = u16(bytes, e + 2);
      if (id === 0x0001) {
        let q = e + 4;
        if (declaredSize === 0xffffffff && q + 8 <= e + 4 + size) {
          declaredSize = u64(bytes, q);
          q += 8;
        }
        if (compressedSize === 0xffffffff && q + 8 <= e + 4 + size) {
          compressedSize = u64(bytes, q);
          q += 8;
        }
        if (localHeaderOffset === 0xffffffff && q + 8 <= e + 4 + size) localHeaderOffset = u64(bytes, q);
      }
      e += 4 + size;
    }
    entries.push({ name, flags, compression, compressedSize, declaredSize, localHeaderOffset });
    p += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}

/** The compressed bytes of an entry, located the way JSZip locates them. */
export function entryData(bytes: Uint8Array, entry: ZipEntry): Uint8Array {
  const h = entry.localHeaderOffset;
  if (h + 30 > bytes.length || u32(bytes, h) !== SIG_LOCAL) {
    throw new ZipFormatError(`the local header of ${quoted(entry.name)} is missing`);
  }
  const start = h + 30 + u16(bytes, h + 26) + u16(bytes, h + 28);
  const end = start + entry.compressedSize;
  if (end > bytes.length) throw new ZipFormatError(`the data of ${quoted(entry.name)} runs past the end of the file`);
  return bytes.subarray(start, end);
}

export interface ZipLimits {
  maxEntries: number;
  maxTotalInflatedBytes: number;
  maxRatio: number;
}

export const DEFAULT_ZIP_LIMITS: ZipLimits = {
  maxEntries: 2000,
  maxTotalInflatedBytes: 200 * 1024 * 1024,
  maxRatio: 200,
};

/** The ratio is only enforced once this much has been inflated, so tiny archives are never flagged. */
const RATIO_GRACE_BYTES = 1024 * 1024;
/** Compressed bytes handed to the inflater at a time: deflate expands at most ~1032x, so ≤ ~4 MiB of output per step. */
const INPUT_SLICE = 4 * 1024;
/** Yield to the event loop (and look at the abort signal) after about this much output. */
const YIELD_EVERY = 16 * 1024 * 1024;

export type ZipCheckResult =
  | { ok: true; entries: ZipEntry[]; inflatedBytes: number }
  | { ok: false; bomb: true; reason: string; inflatedBytes: number }
  | { ok: false; bomb: false; reason: string };

function mib(n: number): string {
  return `${(n / (1024 * 1024)).toFixed(n < 10 * 1024 * 1024 ? 1 : 0)} MiB`;
}

/**
 * Inflates every entry in a streaming way and counts the bytes that really come out (declared sizes are
 * ignored), discarding the output. Stops as soon as a limit is exceeded.
 */
export async function checkZipLimits(bytes: Uint8Array, limits: ZipLimits, signal?: AbortSignal): Promise<ZipCheckResult> {
  let entries: ZipEntry[];
  try {
    entries = readZipDirectory(bytes);
  } catch (error) {
    return { ok: false, bomb: false, reason: `The DOCX is not a readable ZIP archive${ownReason(error)}` };
  }
  if (entries.length > limits.maxEntries) {
    return {
      ok: false,
      bomb: true,
      reason: `it has ${entries.length} entries (the limit is ${limits.maxEntries})`,
      inflatedBytes: 0,
    };
  }

  const archiveSize = Math.max(bytes.length, 1);
  let total = 0;
  let sinceYield = 0;
  const state: { exceeded: string | null } = { exceeded: null };

  const account = (n: number): void => {
    total += n;
    sinceYield += n;
    if (total > limits.maxTotalInflatedBytes) {
      state.exceeded = `it inflates to more than ${mib(limits.maxTotalInflatedBytes)}`;
    } else if (total > RATIO_GRACE_BYTES && total / archiveSize > limits.maxRatio) {
      state.exceeded = `it inflates to more than ${limits.maxRatio} times its size (${mib(total)} so far from a ${mib(bytes.length)} file)`;
    }
  };

  for (const entry of entries) {
    if (signal?.aborted) throw signal.reason ?? new Error('aborted');
    if (entry.flags & 0x1) return { ok: false, bomb: false, reason: 'The DOCX is encrypted (password-protected)' };
    let data: Uint8Array;
    try {
      data = entryData(bytes, entry);
    } catch (error) {
      return { ok: false, bomb: false, reason: `The DOCX is a damaged ZIP archive${ownReason(error)}` };
    }
    if (entry.compression === 0) {
      account(data.length);
    } else if (entry.compression === 8) {
      const inflater = new Inflate((chunk) => account(chunk.length));
      try {
        if (data.length === 0) inflater.push(new Uint8Array(0), true);
        for (let offset = 0; offset < data.length && state.exceeded === null; offset += INPUT_SLICE) {
          const end = Math.min(offset + INPUT_SLICE, data.length);
          inflater.push(data.subarray(offset, end), end === data.length);
          if (sinceYield >= YIELD_EVERY) {
            sinceYield = 0;
            await new Promise<void>((resolve) => setImmediate(resolve));
            if (signal?.aborted) throw signal.reason ?? new Error('aborted');
          }
        }
      } catch (error) {
        if (signal?.aborted) throw error;
        return {
          ok: false,
          bomb: false,
          // fflate's own words ("invalid block type") mean nothing to an owner.
          reason: `The DOCX is a damaged ZIP archive: ${quoted(entry.name)} cannot be decompressed`,
        };
      }
    } else {
      return {
        ok: false,
        bomb: false,
        reason: `The DOCX uses an unsupported ZIP compression method (${entry.compression}) for ${quoted(entry.name)}`,
      };
    }
    if (state.exceeded !== null) return { ok: false, bomb: true, reason: state.exceeded, inflatedBytes: total };
  }
  return { ok: true, entries, inflatedBytes: total };
}

/** Our own description of what is wrong with the archive, after a colon; nothing for any other error. */
function ownReason(error: unknown): string {
  return error instanceof ZipFormatError ? `: ${error.message}` : '';
}

/** An entry name as the owner's reason quotes it: control characters (tabs, newlines) out, at most 100 characters. */
function quoted(name: string): string {
  const chars = Array.from(name.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' '));
  return `"${chars.length > 100 ? `${chars.slice(0, 99).join('')}…` : chars.join('')}"`;
}
