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
 * Every failure is an EmbeddingError with a message fit for the owner.
 */
import { OutboundError, type GuardedHttpClient, type GuardedResponse } from '../http/guarded-client.ts';
import { countTokens } from '../../routers/knowledge-base/tokens.ts';
import { EmbeddingError, type Embedder, type EmbeddingResult } from './embedder.ts';

export { EmbeddingError } from './embedder.ts';

export interface OpenAiEmbedderOptions {
  http: GuardedHttpClient;
  /** e.g. 'https://api.openai.com' or 'https://api.openai.com/v1'. */
  baseUrl: string;
  apiKey?: string;
  model: string;
  /** Sent as `dimensions` (models that support shortening, e.g. text-embedding-3-*), and enforced. */
  dimensions?: number;
  batchSize?: number;
  /** Per batch request. Default: the guarded client's default. */
  timeoutMs?: number;
}

const DEFAULT_BATCH_SIZE = 64;
// OpenAI's limit on inputs per request.
const MAX_BATCH_SIZE = 2048;
const EXCERPT_LENGTH = 200;

/** `${baseUrl}/v1/embeddings`, without doubling a trailing /v1. */
export function embeddingsUrl(baseUrl: string): string {
  const base = baseUrl.trim().replace(/\/+$/, '');
  return /\/v1$/i.test(base) ? `${base}/embeddings` : `${base}/v1/embeddings`;
}

export function createOpenAiEmbedder(options: OpenAiEmbedderOptions): Embedder {
  const { http, model, timeoutMs } = options;
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_BATCH_SIZE) {
    throw new RangeError(`batchSize must be an integer between 1 and ${MAX_BATCH_SIZE}`);
  }
  if (options.dimensions !== undefined && (!Number.isInteger(options.dimensions) || options.dimensions < 1)) {
    throw new RangeError('dimensions must be a positive integer');
  }
  if (model.trim() === '') throw new RangeError('model must not be empty');
  const url = embeddingsUrl(options.baseUrl);
  const apiKey = options.apiKey?.trim();
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (apiKey) headers['authorization'] = `Bearer ${apiKey}`;

  let dimensions = options.dimensions ?? 0;

  async function embedBatch(batch: string[], signal: AbortSignal | undefined): Promise<EmbeddingResult> {
    const payload: Record<string, unknown> = { model, input: batch };
    if (options.dimensions !== undefined) payload['dimensions'] = options.dimensions;

    let response: GuardedResponse;
    try {
      response = await http.request(url, { method: 'POST', headers, body: JSON.stringify(payload), timeoutMs, signal });
    } catch (err) {
      if (err instanceof OutboundError) throw new EmbeddingError(err.message, { cause: err });
      throw err;
    }
    if (response.status < 200 || response.status > 299) throw statusError(response);

    let body: unknown;
    try {
      body = response.json();
    } catch (err) {
      throw new EmbeddingError('embedding provider returned an invalid response format (body is not JSON)', {
        status: response.status,
        cause: err,
      });
    }
    const parsed = parseResponse(body, batch.length);

    // Learned from the first response only once the whole batch agrees.
    const expected = dimensions !== 0 ? dimensions : (parsed.vectors[0]?.length ?? 0);
    for (const vector of parsed.vectors) {
      if (vector.length !== expected) {
        const hint = options.dimensions !== undefined ? ' (does the model support the dimensions parameter?)' : '';
        throw new EmbeddingError(
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
        if (signal?.aborted) throw new EmbeddingError('embedding request was aborted', { cause: signal.reason });
        const result = await embedBatch(texts.slice(start, start + batchSize), signal);
        vectors.push(...result.vectors);
        promptTokens += result.promptTokens;
      }
      return { vectors, promptTokens };
    },
  };
}

function statusError(response: GuardedResponse): EmbeddingError {
  const status = response.status;
  if (status === 401 || status === 403) {
    return new EmbeddingError(`embedding provider rejected the API key (HTTP ${status})`, { status });
  }
  if (status === 429) {
    const retryAfter = headerValue(response.headers['retry-after']);
    const suffix = retryAfter !== undefined && /^\d{1,6}$/.test(retryAfter) ? `; retry after ${retryAfter} s` : '';
    return new EmbeddingError(`embedding provider rate limited the request (HTTP 429)${suffix}`, { status });
  }
  const excerpt = errorExcerpt(response);
  return new EmbeddingError(`embedding provider returned HTTP ${status}${excerpt === '' ? '' : `: ${excerpt}`}`, { status });
}

/** The provider's error message (OpenAI's `{ error: { message } }`), else the start of the body; one line, at most 200 characters. */
function errorExcerpt(response: GuardedResponse): string {
  let text = '';
  try {
    const body = response.json();
    if (isRecord(body)) {
      const error = body['error'];
      if (isRecord(error) && typeof error['message'] === 'string') text = error['message'];
      else if (typeof error === 'string') text = error;
      else if (typeof body['message'] === 'string') text = body['message'];
      else if (typeof body['detail'] === 'string') text = body['detail'];
    }
  } catch {
    // Not JSON: fall back to the raw text.
  }
  if (text === '') text = response.text();
  // Control characters (incl. newlines) would let a provider forge log lines.
  text = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').replace(/\s+/g, ' ').trim();
  const chars = Array.from(text);
  return chars.length > EXCERPT_LENGTH ? `${chars.slice(0, EXCERPT_LENGTH).join('')}…` : text;
}

function parseResponse(body: unknown, expected: number): { vectors: Float32Array[]; promptTokens: number | undefined } {
  const invalid = (detail: string): EmbeddingError =>
    new EmbeddingError(`embedding provider returned an invalid response format (${detail})`);
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
  const promptTokens = typeof tokens === 'number' && Number.isInteger(tokens) && tokens >= 0 ? tokens : undefined;
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

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
