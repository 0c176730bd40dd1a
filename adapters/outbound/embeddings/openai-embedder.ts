/**
 * Embeddings from any OpenAI-compatible endpoint (OpenAI, Azure-style proxies,
 * Ollama, vLLM, LM Studio, TEI...): POST {baseUrl}/v1/embeddings with
 * `{ model, input: string[], dimensions? }`, through the guarded outbound
 * client (the base URL is owner-configured, hence untrusted).
 *
 * - Texts are sent in sequential batches of `batchSize` (default 64).
 * - Results are placed by `data[i].index` (providers may answer out of order);
 *   an item without `index` takes its position.
 * - `embedding` may be an array of numbers or a base64 string of little-endian
 *   float32 (the `encoding_format: 'base64'` wire form).
 * - promptTokens sums `usage.prompt_tokens`; a batch without usage is
 *   estimated with countTokens (o200k).
 * - Dimensions: the configured value, or learned from the first response;
 *   every later vector must have that length.
 * Every failure is an AiUpstreamError (source 'embeddings') with a message fit for the owner.
 */
import type { GuardedHttpClient, GuardedResponse } from '../http/guarded-client.ts';
import { isCount, isRecord, redactKey, requestSecrets, upstreamExcerpt } from '../ai/core/response.ts';
import { AiUpstreamError, invalidResponse, statusError, transportError, upstreamMessages } from '../ai/core/upstream-error.ts';
import { countTokens } from '../text/tokens.ts';
import type { Embedder, EmbeddingResult } from './embedder.ts';

export interface OpenAiEmbedderOptions {
  http: GuardedHttpClient;
  /** e.g. 'https://api.openai.com' or 'https://api.openai.com/v1'. */
  baseUrl: string;
  apiKey?: string;
  model: string;
  /** Sent as `dimensions` (models that support shortening, e.g. text-embedding-3-*), and enforced. */
  dimensions?: number;
  batchSize?: number;
  /** Per batch request. Default: 30 s, the guarded client's default. */
  timeoutMs?: number;
}

const DEFAULT_BATCH_SIZE = 64;
const DEFAULT_TIMEOUT_MS = 30_000;
// OpenAI's limit on inputs per request.
const MAX_BATCH_SIZE = 2048;

/** `${baseUrl}/v1/embeddings`, without doubling a trailing /v1. */
export function embeddingsUrl(baseUrl: string): string {
  const base = baseUrl.trim().replace(/\/+$/, '');
  return /\/v1$/i.test(base) ? `${base}/embeddings` : `${base}/v1/embeddings`;
}

export function createOpenAiEmbedder(options: OpenAiEmbedderOptions): Embedder {
  const { http, model } = options;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_BATCH_SIZE) {
    throw new RangeError(`batchSize must be an integer between 1 and ${MAX_BATCH_SIZE}`);
  }
  if (options.dimensions !== undefined && (!Number.isInteger(options.dimensions) || options.dimensions < 1)) {
    throw new RangeError('dimensions must be a positive integer');
  }
  if (model.trim() === '') throw new RangeError('model must not be empty');
  const url = embeddingsUrl(options.baseUrl);
  const apiKey = options.apiKey?.trim() || undefined;
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (apiKey) headers['authorization'] = `Bearer ${apiKey}`;
  const secrets = requestSecrets(apiKey, url);
  const redact = (text: string): string => redactKey(text, secrets);

  let dimensions = options.dimensions ?? 0;

  async function embedBatch(batch: string[], signal: AbortSignal | undefined): Promise<EmbeddingResult> {
    const payload: Record<string, unknown> = { model, input: batch };
    if (options.dimensions !== undefined) payload['dimensions'] = options.dimensions;

    let response: GuardedResponse;
    try {
      response = await http.request(url, { method: 'POST', headers, body: JSON.stringify(payload), timeoutMs, signal });
    } catch (err) {
      throw transportError('embeddings', err, timeoutMs, redact);
    }
    if (response.status < 200 || response.status > 299) {
      throw statusError('embeddings', response.status, upstreamExcerpt(response.text(), secrets), headerValue(response.headers['retry-after']));
    }

    let body: unknown;
    try {
      body = response.json();
    } catch {
      throw invalidResponse('embeddings', 'the embedding provider did not return JSON', upstreamExcerpt(response.text(), secrets));
    }
    const parsed = parseResponse(body, batch.length);

    // Learned from the first response only once the whole batch agrees.
    const expected = dimensions !== 0 ? dimensions : (parsed.vectors[0]?.length ?? 0);
    for (const vector of parsed.vectors) {
      if (vector.length !== expected) {
        const hint = options.dimensions !== undefined ? ' (does the model support the dimensions parameter?)' : '';
        throw new AiUpstreamError(
          'embeddings',
          'invalid_response',
          `embedding dimension mismatch: provider returned a ${vector.length}-dimensional vector, expected ${expected}${hint}`,
        );
      }
    }
    dimensions = expected;
    const promptTokens = parsed.promptTokens ?? batch.reduce((sum, text) => sum + countTokens(text), 0);
    return { vectors: parsed.vectors, promptTokens };
  }

  return {
    model,
    get dimensions() {
      return dimensions;
    },
    async embed(texts: string[], signal?: AbortSignal): Promise<EmbeddingResult> {
      const vectors: Float32Array[] = [];
      let promptTokens = 0;
      for (let start = 0; start < texts.length; start += batchSize) {
        if (signal?.aborted) throw new AiUpstreamError('embeddings', 'aborted', upstreamMessages('embeddings').aborted);
        const result = await embedBatch(texts.slice(start, start + batchSize), signal);
        vectors.push(...result.vectors);
        promptTokens += result.promptTokens;
      }
      return { vectors, promptTokens };
    },
  };
}

function parseResponse(body: unknown, expected: number): { vectors: Float32Array[]; promptTokens: number | undefined } {
  const invalid = (reason: string) => invalidResponse('embeddings', `the embedding provider's reply is not a list of embeddings (${reason})`);
  if (!isRecord(body) || !Array.isArray(body['data'])) throw invalid('no data array');
  const data: unknown[] = body['data'];
  if (data.length !== expected) throw invalid(`expected ${expected} embeddings, got ${data.length}`);

  const vectors = new Array<Float32Array | undefined>(expected).fill(undefined);
  data.forEach((item, position) => {
    if (!isRecord(item)) throw invalid('data item is not an object');
    const index = item['index'] === undefined ? position : item['index'];
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= expected) {
      throw invalid('embedding index out of range');
    }
    if (vectors[index] !== undefined) throw invalid(`duplicate embedding index ${index}`);
    const vector = toVector(item['embedding']);
    if (vector === null) throw invalid('embedding is not a non-empty array of finite numbers');
    vectors[index] = vector;
  });

  const result: Float32Array[] = [];
  for (const vector of vectors) {
    if (vector === undefined) throw invalid('missing embedding index');
    result.push(vector);
  }

  const usage = body['usage'];
  const tokens = isRecord(usage) ? usage['prompt_tokens'] : undefined;
  const promptTokens = isCount(tokens) ? tokens : undefined;
  return { vectors: result, promptTokens };
}

function toVector(value: unknown): Float32Array | null {
  if (Array.isArray(value)) {
    if (value.length === 0) return null;
    const vector = new Float32Array(value.length);
    for (let i = 0; i < value.length; i++) {
      const x: unknown = value[i];
      if (typeof x !== 'number' || !Number.isFinite(x)) return null;
      vector[i] = x;
    }
    return vector;
  }
  if (typeof value === 'string' && value !== '' && /^[A-Za-z0-9+/]*={0,2}$/.test(value)) {
    const bytes = Buffer.from(value, 'base64');
    if (bytes.length === 0 || bytes.length % 4 !== 0) return null;
    const vector = new Float32Array(bytes.length / 4);
    for (let i = 0; i < vector.length; i++) {
      const x = bytes.readFloatLE(i * 4);
      if (!Number.isFinite(x)) return null;
      vector[i] = x;
    }
    return vector;
  }
  return null;
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
