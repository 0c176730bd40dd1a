import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createGuardedHttpClient, type GuardedHttpClient } from '../http/guarded-client.ts';
import { countTokens } from '../text/tokens.ts';
import { AiUpstreamError } from '../ai/core/upstream-error.ts';
import { createOpenAiEmbedder, embeddingsUrl } from './openai-embedder.ts';

/** What the fake provider does for the next requests. */
type Mode = 'ok' | 'no-usage' | 'status' | 'not-json' | 'bad-shape' | 'missing-index' | 'ragged' | 'base64' | 'hang';

interface Recorded {
  path: string;
  authorization: string | undefined;
  body: { model: string; input: string[]; dimensions?: number };
}

/** Deterministic fake embedding: [length, first char code, last char code, ...zeros]. */
function fakeVector(text: string, dimensions: number): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  vector[0] = text.length;
  if (dimensions > 1) vector[1] = text.charCodeAt(0) || 0;
  if (dimensions > 2) vector[2] = text.charCodeAt(text.length - 1) || 0;
  return vector;
}

let server: http.Server;
let baseUrl: string;
let client: GuardedHttpClient;
let mode: Mode = 'ok';
let status = 200;
let statusBody = '';
let requests: Recorded[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Recorded['body'];
      requests.push({ path: req.url ?? '', authorization: req.headers.authorization, body });
      const send = (code: number, payload: string, headers: Record<string, string> = {}): void => {
        res.writeHead(code, { 'content-type': 'application/json', ...headers });
        res.end(payload);
      };
      if (mode === 'hang') return; // never answers; the client's timeout must fire
      if (mode === 'status') return send(status, statusBody, status === 429 ? { 'retry-after': '7' } : {});
      if (mode === 'not-json') return send(200, '<html>oops</html>');
      if (mode === 'bad-shape') return send(200, JSON.stringify({ object: 'list', result: [] }));
      const dimensions = body.dimensions ?? 8;
      const items = body.input.map((text, index) => ({
        object: 'embedding',
        index,
        embedding:
          mode === 'base64'
            ? Buffer.from(new Float32Array(fakeVector(text, dimensions)).buffer).toString('base64')
            : fakeVector(text, mode === 'ragged' && text.startsWith('RAGGED') ? dimensions + 1 : dimensions),
      }));
      // Answer in reverse order: the client must reorder by `index`.
      const data = items.reverse().map((item) => (mode === 'missing-index' ? { ...item, index: 0 } : item));
      const payload: Record<string, unknown> = { object: 'list', data, model: body.model };
      if (mode !== 'no-usage') payload['usage'] = { prompt_tokens: body.input.length * 10, total_tokens: body.input.length * 10 };
      send(200, JSON.stringify(payload));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  baseUrl = `http://127.0.0.1:${port}`;
  client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${port}`] });
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  mode = 'ok';
  status = 200;
  statusBody = '';
  requests = [];
});

const texts = ['alpha', 'bravo!', 'charlie', 'delta', 'echo echo', 'fox'];

describe('createOpenAiEmbedder', () => {
  it('posts batches to /v1/embeddings and reorders results by index', async () => {
    const embedder = createOpenAiEmbedder({ http: client, baseUrl, apiKey: 'sk-test', model: 'text-embedding-3-small', batchSize: 4 });
    expect(embedder.model).toBe('text-embedding-3-small');
    expect(embedder.dimensions).toBe(0); // not known before the first response

    const { vectors, promptTokens } = await embedder.embed(texts);
    expect(requests).toHaveLength(2);
    expect(requests.map((r) => r.body.input)).toEqual([texts.slice(0, 4), texts.slice(4)]);
    expect(requests.every((r) => r.path === '/v1/embeddings' && r.body.model === 'text-embedding-3-small')).toBe(true);
    expect(requests[0]!.body.dimensions).toBeUndefined();
    expect(requests[0]!.authorization).toBe('Bearer sk-test');

    expect(vectors).toHaveLength(texts.length);
    vectors.forEach((vector, i) => {
      expect(vector).toBeInstanceOf(Float32Array);
      expect(Array.from(vector)).toEqual(fakeVector(texts[i]!, 8));
    });
    expect(promptTokens).toBe(texts.length * 10);
    expect(embedder.dimensions).toBe(8);
  });

  it('uses the default batch size of 64', async () => {
    const many = Array.from({ length: 130 }, (_, i) => `text ${i}`);
    const { vectors } = await createOpenAiEmbedder({ http: client, baseUrl, model: 'm' }).embed(many);
    expect(requests.map((r) => r.body.input.length)).toEqual([64, 64, 2]);
    expect(vectors.map((v) => v[0])).toEqual(many.map((t) => t.length));
  });

  it('does not double /v1, sends no Authorization without a key, and sends requested dimensions', async () => {
    const embedder = createOpenAiEmbedder({ http: client, baseUrl: `${baseUrl}/v1/`, model: 'm', dimensions: 3 });
    expect(embedder.dimensions).toBe(3);
    const { vectors } = await embedder.embed(['hi']);
    expect(requests[0]!.path).toBe('/v1/embeddings');
    expect(requests[0]!.authorization).toBeUndefined();
    expect(requests[0]!.body.dimensions).toBe(3);
    expect(vectors[0]!.length).toBe(3);

    expect(embeddingsUrl('https://api.example.com')).toBe('https://api.example.com/v1/embeddings');
    expect(embeddingsUrl('https://api.example.com/v1')).toBe('https://api.example.com/v1/embeddings');
    expect(embeddingsUrl('https://proxy.example.com/openai/')).toBe('https://proxy.example.com/openai/v1/embeddings');
  });

  it('makes no request for an empty input', async () => {
    const result = await createOpenAiEmbedder({ http: client, baseUrl, model: 'm' }).embed([]);
    expect(result).toEqual({ vectors: [], promptTokens: 0 });
    expect(requests).toHaveLength(0);
  });

  it('estimates tokens with countTokens when usage is missing', async () => {
    mode = 'no-usage';
    const { promptTokens } = await createOpenAiEmbedder({ http: client, baseUrl, model: 'm' }).embed(texts);
    expect(promptTokens).toBe(texts.reduce((sum, t) => sum + countTokens(t), 0));
  });

  it('decodes base64 embeddings', async () => {
    mode = 'base64';
    const { vectors } = await createOpenAiEmbedder({ http: client, baseUrl, model: 'm' }).embed(['abc', 'de']);
    expect(Array.from(vectors[0]!)).toEqual(fakeVector('abc', 8));
    expect(Array.from(vectors[1]!)).toEqual(fakeVector('de', 8));
  });

  it('maps 401 and 403 to a rejected API key', async () => {
    mode = 'status';
    for (const code of [401, 403]) {
      status = code;
      statusBody = JSON.stringify({ error: { message: 'Incorrect API key provided: sk-****' } });
      const error = await createOpenAiEmbedder({ http: client, baseUrl, apiKey: 'bad', model: 'm' })
        .embed(['x'])
        .catch((err: unknown) => err);
      expect(error).toBeInstanceOf(AiUpstreamError);
      expect((error as AiUpstreamError).message).toBe(
        `the embedding provider rejected the API key; check the key configured for this embedding provider (HTTP ${code})`,
      );
      expect((error as AiUpstreamError).kind).toBe('auth_failed');
      expect((error as AiUpstreamError).status).toBe(code);
    }
  });

  it('maps 429 to rate limiting', async () => {
    mode = 'status';
    status = 429;
    statusBody = JSON.stringify({ error: { message: 'Rate limit reached' } });
    await expect(createOpenAiEmbedder({ http: client, baseUrl, model: 'm' }).embed(['x'])).rejects.toThrow(
      'the embedding provider is rate limiting requests; try again later (HTTP 429); retry after 7 s',
    );
  });

  it('reports other statuses with a short, single-line excerpt', async () => {
    mode = 'status';
    status = 404;
    statusBody = JSON.stringify({ error: { message: 'The model `nope` does not exist', type: 'invalid_request_error' } });
    await expect(createOpenAiEmbedder({ http: client, baseUrl, model: 'nope' }).embed(['x'])).rejects.toThrow(
      'the embedding provider answered HTTP 404: The model `nope` does not exist',
    );

    status = 500;
    statusBody = `Internal\nServer Error ${'x'.repeat(1000)}`;
    const error = (await createOpenAiEmbedder({ http: client, baseUrl, model: 'm' })
      .embed(['x'])
      .catch((err: unknown) => err)) as AiUpstreamError;
    expect(error).toBeInstanceOf(AiUpstreamError);
    expect(error.message.startsWith('the embedding provider answered HTTP 500: Internal Server Error xxx')).toBe(true);
    expect(error.message).not.toContain('\n');
    expect(error.message.length).toBeLessThan(260);
  });

  it('rejects malformed responses', async () => {
    const embedder = createOpenAiEmbedder({ http: client, baseUrl, model: 'm' });
    for (const bad of ['not-json', 'bad-shape', 'missing-index'] as const) {
      mode = bad;
      const error = await embedder.embed(['a', 'b']).catch((err: unknown) => err);
      expect(error, bad).toBeInstanceOf(AiUpstreamError);
      expect((error as Error).message, bad).toContain('invalid response format');
    }
  });

  it('rejects vectors of unequal length, within and across responses', async () => {
    mode = 'ragged';
    await expect(createOpenAiEmbedder({ http: client, baseUrl, model: 'm' }).embed(['ok', 'RAGGED'])).rejects.toThrow(
      /embedding dimension mismatch: provider returned a 9-dimensional vector, expected 8/,
    );

    // Learned from the first response, enforced on later calls.
    const embedder = createOpenAiEmbedder({ http: client, baseUrl, model: 'm', batchSize: 1 });
    await embedder.embed(['ok']);
    expect(embedder.dimensions).toBe(8);
    await expect(embedder.embed(['fine', 'RAGGED'])).rejects.toThrow(AiUpstreamError);

    // Configured dimensions the provider ignores.
    mode = 'ok';
    requests = [];
    const configured = createOpenAiEmbedder({ http: client, baseUrl, model: 'm', dimensions: 8 });
    await expect(configured.embed(['x'])).resolves.toMatchObject({ promptTokens: 10 });
    mode = 'ragged';
    await expect(configured.embed(['RAGGED'])).rejects.toThrow(/expected 8 \(does the model support the dimensions parameter\?\)/);
  });

  it('turns outbound failures into AiUpstreamError with the outbound message as detail', async () => {
    // Not allow-listed: the SSRF guard refuses the loopback address.
    const strict = createGuardedHttpClient({ allowHosts: [] });
    const blocked = await createOpenAiEmbedder({ http: strict, baseUrl, model: 'm' })
      .embed(['x'])
      .catch((err: unknown) => err);
    expect(blocked).toBeInstanceOf(AiUpstreamError);
    expect((blocked as AiUpstreamError).kind).toBe('blocked');
    expect((blocked as AiUpstreamError).detail).toMatch(/is not a public address/);

    mode = 'hang';
    const slow = await createOpenAiEmbedder({ http: client, baseUrl, model: 'm', timeoutMs: 200 })
      .embed(['x'])
      .catch((err: unknown) => err);
    expect(slow).toMatchObject({ kind: 'timeout', message: 'the embedding provider took longer than 0.2 seconds to answer' });
    expect((slow as AiUpstreamError).detail).toMatch(/timed out after 200 ms/);

    const controller = new AbortController();
    controller.abort();
    await expect(createOpenAiEmbedder({ http: client, baseUrl, model: 'm' }).embed(['x'], controller.signal)).rejects.toThrow(AiUpstreamError);
  });

  it('validates its options', () => {
    expect(() => createOpenAiEmbedder({ http: client, baseUrl, model: 'm', batchSize: 0 })).toThrow(RangeError);
    expect(() => createOpenAiEmbedder({ http: client, baseUrl, model: 'm', dimensions: -1 })).toThrow(RangeError);
    expect(() => createOpenAiEmbedder({ http: client, baseUrl, model: ' ' })).toThrow(RangeError);
  });
});
