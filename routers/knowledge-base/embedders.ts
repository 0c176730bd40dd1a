import type { AppDeps } from '../context.ts';
import type { Embedder } from '../../adapters/outbound/embeddings/embedder.ts';
import { createLocalEmbedder, LOCAL_EMBEDDING_MODEL } from '../../adapters/outbound/embeddings/local-embedder.ts';
import { createOpenAiEmbedder } from '../../adapters/outbound/embeddings/openai-embedder.ts';
import type { AnalyzerLanguage } from '../../adapters/outbound/text/text-analysis.ts';
import type { KbConfigRow } from './repository.ts';

const localEmbedders = new Map<string, Embedder>();

/** What building an embedder needs: the guarded client and the key box for providers. */
export type EmbedderDeps = Pick<AppDeps, 'http' | 'secrets'>;

/**
 * The embedder of a configuration: 'serving' is the model of the vectors queries read (and new documents
 * join); 'target' is the model a re-embedding is moving to. They are the same except during a switch.
 */
export function embedderFor(deps: EmbedderDeps, config: KbConfigRow, which: 'serving' | 'target' = 'serving'): Embedder {
  const settings = which === 'serving' ? config.serving_embedding : config.embedding;
  const apiKeyEnc = which === 'serving' ? config.serving_embedding_api_key_enc : config.embedding_api_key_enc;
  if (settings.provider === 'local') {
    const key = `${settings.dimensions}:${config.language}`;
    let embedder = localEmbedders.get(key);
    if (!embedder) {
      embedder = createLocalEmbedder({ dimensions: settings.dimensions, language: config.language as AnalyzerLanguage });
      localEmbedders.set(key, embedder);
    }
    return embedder;
  }
  return createOpenAiEmbedder({
    http: deps.http,
    baseUrl: settings.baseUrl!,
    apiKey: apiKeyEnc ? deps.secrets.open(apiKeyEnc) : undefined,
    model: settings.model,
    dimensions: settings.dimensions || undefined,
  });
}

/**
 * The embedder for a document's chunks (ingestion, re-embedding). The local one runs in the document worker
 * pool: a document can have thousands of chunks, and that CPU must not stall requests. Queries keep
 * {@link embedderFor}: one short text, and a query must not wait behind documents for a worker.
 */
export function documentEmbedderFor(
  deps: EmbedderDeps & Pick<AppDeps, 'documentPool'>,
  config: KbConfigRow,
  which: 'serving' | 'target' = 'serving',
): Embedder {
  const settings = which === 'serving' ? config.serving_embedding : config.embedding;
  if (settings.provider !== 'local') return embedderFor(deps, config, which);
  const model = { dimensions: settings.dimensions, language: config.language as AnalyzerLanguage };
  return {
    model: LOCAL_EMBEDDING_MODEL,
    dimensions: settings.dimensions,
    embed: (texts, signal) => deps.documentPool.embedLocal(texts, model, signal),
  };
}
