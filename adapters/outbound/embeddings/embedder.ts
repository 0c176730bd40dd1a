/**
 * Embedding providers: text → fixed-length vectors for the knowledge base's
 * semantic index. Implementations: local-embedder.ts (feature hashing, no
 * model, no network) and openai-embedder.ts (any OpenAI-compatible
 * /v1/embeddings endpoint, through the guarded outbound client, failing with
 * the AI core's AiUpstreamError).
 */

export interface EmbeddingResult {
  /** One vector per input text, in input order, all of length `dimensions`. */
  vectors: Float32Array[];
  /** Tokens billed/consumed, as reported by the provider or estimated with countTokens. */
  promptTokens: number;
}

export interface Embedder {
  /** Model identifier; stored with each vector so a model change can be detected. */
  readonly model: string;
  /** Vector length. For a remote embedder without configured dimensions this is 0 until the first response. */
  readonly dimensions: number;
  embed(texts: string[], signal?: AbortSignal): Promise<EmbeddingResult>;
}

/** Cosine similarity of two equal-length vectors; 0 when either is the zero vector. */
export function cosineSimilarity(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) throw new RangeError(`vector lengths differ (${a.length} vs ${b.length})`);
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}
