import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import type { ExtractedDocument } from './extract.ts';
import { ParseError } from './parse-error.ts';
import { sniffDocumentKind, type DocumentKind } from './sniff.ts';

export interface ParserSelfTestResult {
  kind: DocumentKind;
  ok: boolean;
  characters: number;
  pages: number | null;
  latencyMs: number;
  error?: string;
}

const SAMPLES: Array<{ kind: DocumentKind; file: string }> = [
  { kind: 'pdf', file: 'sample.pdf' },
  { kind: 'docx', file: 'sample.docx' },
  { kind: 'md', file: 'sample.md' },
  { kind: 'txt', file: 'sample.txt' },
];

/** How the self-test parses: the service passes its worker pool, so the check runs where documents are parsed. */
export type ExtractFn = (kind: DocumentKind, bytes: Uint8Array, options: { signal: AbortSignal }) => Promise<ExtractedDocument>;

/**
 * Runs each built-in parser on the small real sample files in adapters/outbound/parsers/samples/ (sample.pdf 2
 * pages, sample.docx with a table, sample.md, sample.txt) and reports per format: ok, characters, pages,
 * latencyMs, error. Never throws.
 */
export async function runParserSelfTest(extract: ExtractFn): Promise<ParserSelfTestResult[]> {
  const results: ParserSelfTestResult[] = [];
  for (const { kind, file } of SAMPLES) {
    const started = performance.now();
    const elapsed = () => Math.round((performance.now() - started) * 100) / 100;
    try {
      const bytes = new Uint8Array(await readFile(new URL(`./samples/${file}`, import.meta.url)));
      const sniffed = sniffDocumentKind(bytes, file);
      if (!sniffed.ok) throw new ParseError(sniffed.reason);
      if (sniffed.kind !== kind) throw new ParseError(`${file} was recognised as ${sniffed.kind}, expected ${kind}`);
      const doc = await extract(kind, bytes, { signal: AbortSignal.timeout(30_000) });
      const ok = doc.characters > 0;
      results.push({
        kind,
        ok,
        characters: doc.characters,
        pages: doc.pageCount,
        latencyMs: elapsed(),
        ...(ok ? {} : { error: 'no text extracted' }),
      });
    } catch (error) {
      results.push({
        kind,
        ok: false,
        characters: 0,
        pages: null,
        latencyMs: elapsed(),
        error: error instanceof ParseError ? error.reason : error instanceof Error ? error.message : String(error),
      });
    }
  }
  return results;
}
