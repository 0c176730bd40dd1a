import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cosineSimilarity } from './embedder.ts';
import { createLocalEmbedder, LOCAL_EMBEDDING_MODEL, localVectorOf } from './local-embedder.ts';
import { analyze } from '../text/text-analysis.ts';
import { countTokens } from '../text/tokens.ts';

function norm(vector: Float32Array): number {
  return Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0));
}

function digest(vectors: Float32Array[]): string {
  const hash = createHash('sha256');
  for (const vector of vectors) hash.update(Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength));
  return hash.digest('hex');
}

const SAMPLE = [
  'How do I reset my password?',
  'Invoices are sent on the first day of each month.',
  'Le café est fermé le dimanche.',
  '知识库检索',
  'COVID-19 cases in 2019',
];

describe('createLocalEmbedder', () => {
  it('describes itself', () => {
    const embedder = createLocalEmbedder();
    expect(embedder.model).toBe(LOCAL_EMBEDDING_MODEL);
    expect(embedder.dimensions).toBe(384);
    expect(createLocalEmbedder({ dimensions: 64 }).dimensions).toBe(64);
    expect(() => createLocalEmbedder({ dimensions: 0 })).toThrow(RangeError);
    expect(() => createLocalEmbedder({ dimensions: 1.5 })).toThrow(RangeError);
  });

  it('returns unit vectors of the configured length, one per text, in order', async () => {
    for (const dimensions of [384, 64, 1536]) {
      const { vectors } = await createLocalEmbedder({ dimensions }).embed(SAMPLE);
      expect(vectors).toHaveLength(SAMPLE.length);
      for (const vector of vectors) {
        expect(vector).toBeInstanceOf(Float32Array);
        expect(vector.length).toBe(dimensions);
        expect(norm(vector)).toBeCloseTo(1, 5);
      }
    }
    const embedder = createLocalEmbedder();
    const { vectors: batch } = await embedder.embed(SAMPLE);
    const { vectors: single } = await embedder.embed([SAMPLE[2]!]);
    expect(Array.from(batch[2]!)).toEqual(Array.from(single[0]!));
  });

  it('is deterministic within and across processes', async () => {
    const embedder = createLocalEmbedder();
    const first = await embedder.embed(SAMPLE);
    const second = await createLocalEmbedder().embed(SAMPLE);
    expect(digest(second.vectors)).toBe(digest(first.vectors));

    // A fresh Node process (different heap, hash seeds, Map internals) gives bit-identical vectors.
    const modulePath = fileURLToPath(new URL('./local-embedder.ts', import.meta.url));
    const script = `
      import { createHash } from 'node:crypto';
      const { createLocalEmbedder } = await import(${JSON.stringify(modulePath)});
      const { vectors } = await createLocalEmbedder().embed(${JSON.stringify(SAMPLE)});
      const hash = createHash('sha256');
      for (const v of vectors) hash.update(Buffer.from(v.buffer, v.byteOffset, v.byteLength));
      process.stdout.write(hash.digest('hex'));
    `;
    const output = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      cwd: fileURLToPath(new URL('../../..', import.meta.url)),
    });
    expect(output).toBe(digest(first.vectors));
  });

  it('places related texts closer than unrelated ones', async () => {
    const embedder = createLocalEmbedder();
    const triples: Array<[anchor: string, related: string, unrelated: string]> = [
      ['How do I reset my password?', 'Steps to reset a forgotten account password', 'Our office is closed on public holidays'],
      ['The cat sat on the mat', 'A kitten is sitting on the mat', 'Stock markets fell sharply today'],
      ['running shoes for marathon training', 'best shoes for runners training for a marathon', 'how to bake sourdough bread'],
      ['invoice payment failed', 'the payment of my invoice did not go through', 'configure the SMTP server'],
      ['tokenization of documents', 'a tokenizer splits the document into tokens', 'weather forecast for tomorrow'],
    ];
    for (const [anchor, related, unrelated] of triples) {
      const { vectors } = await embedder.embed([anchor, related, unrelated]);
      const [a, r, u] = vectors as [Float32Array, Float32Array, Float32Array];
      const close = cosineSimilarity(a, r);
      const far = cosineSimilarity(a, u);
      expect(close, `${anchor} / ${related}`).toBeGreaterThan(far + 0.2);
      expect(Math.abs(far)).toBeLessThan(0.2);
    }
  });

  it('tolerates typos and inflection through character 4-grams', async () => {
    const embedder = createLocalEmbedder();
    const { vectors } = await embedder.embed(['authentication', 'authentcation', 'photosynthesis']);
    const [right, typo, other] = vectors as [Float32Array, Float32Array, Float32Array];
    expect(cosineSimilarity(right, typo)).toBeGreaterThan(0.2);
    expect(cosineSimilarity(right, typo)).toBeGreaterThan(cosineSimilarity(right, other) + 0.2);
  });

  it('uses the configured language', async () => {
    const english = createLocalEmbedder();
    const spanish = createLocalEmbedder({ language: 'es' });
    // Spanish: 'las'/'la' are stop words and luces → luz; Porter keeps 'la' and stems luces → 'luce'.
    const [es1, es2] = (await spanish.embed(['las luces', 'la luz'])).vectors as [Float32Array, Float32Array];
    expect(cosineSimilarity(es1, es2)).toBeCloseTo(1, 5);
    const [en1, en2] = (await english.embed(['las luces', 'la luz'])).vectors as [Float32Array, Float32Array];
    expect(cosineSimilarity(en1, en2)).toBeLessThan(0.9);
  });

  it('embeds a text without letters or digits as the zero vector, and stop-word-only text by its words', async () => {
    const embedder = createLocalEmbedder();
    const { vectors } = await embedder.embed(['', '  ...  !!', 'to be or not to be', 'to be or not to be']);
    expect(vectors[0]!.every((x) => x === 0)).toBe(true);
    expect(vectors[1]!.every((x) => x === 0)).toBe(true);
    expect(norm(vectors[2]!)).toBeCloseTo(1, 5);
    expect(Array.from(vectors[2]!)).toEqual(Array.from(vectors[3]!));
  });

  it('gives the same vector, bit for bit, from terms the caller analysed already (the parsing worker)', async () => {
    const texts = [...SAMPLE, '', '  ...  !!', 'to be or not to be', 'las luces'];
    for (const [language, dimensions] of [
      ['en', 384],
      ['es', 64],
    ] as const) {
      const { vectors } = await createLocalEmbedder({ language, dimensions }).embed(texts);
      const fromTerms = texts.map((text) => localVectorOf(text, analyze(text, language), dimensions));
      expect(digest(fromTerms)).toBe(digest(vectors));
    }
    expect(() => localVectorOf('x', ['x'], 0)).toThrow(RangeError);
  });

  it('reports promptTokens with countTokens', async () => {
    const { promptTokens } = await createLocalEmbedder().embed(SAMPLE);
    expect(promptTokens).toBe(SAMPLE.reduce((sum, text) => sum + countTokens(text), 0));
    expect((await createLocalEmbedder().embed([])).vectors).toEqual([]);
  });

  it('honours an aborted signal', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(createLocalEmbedder().embed(['x'], controller.signal)).rejects.toThrow();
  });

  it('is fast (throughput logged, not asserted)', async () => {
    const embedder = createLocalEmbedder();
    const words = 'knowledge base chunk retrieval index search query answer document upload billing refund invoice account password'.split(' ');
    const texts = Array.from({ length: 1000 }, (_, i) => {
      let text = `Item ${i}:`;
      for (let j = 0; text.length < 200; j++) text += ` ${words[(i * 7 + j * 3) % words.length]}`;
      return text.slice(0, 200);
    });
    await embedder.embed(texts.slice(0, 50)); // warm-up
    const start = performance.now();
    const { vectors } = await embedder.embed(texts);
    const ms = performance.now() - start;
    expect(vectors).toHaveLength(1000);
    console.log(`local-hash-v1: 1000 texts of 200 chars in ${ms.toFixed(1)} ms (${Math.round((1000 / ms) * 1000)} texts/s)`);
  });
});
