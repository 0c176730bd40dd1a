import type { AppDeps } from '../context.ts';
import type { Embedder } from '../../adapters/embeddings/embedder.ts';
import { createLocalEmbedder } from '../../adapters/embeddings/local-embedder.ts';
import { createOpenAiEmbedder } from '../../adapters/embeddings/openai-embedder.ts';
import type { AnalyzerLanguage } from './text-analysis.ts';
import type { KbConfigRow } from './repository.ts';

const localEmbedders = new Map<string, Embedder>();

/**
 * The embedder of a configuration: 'serving' is the model of the vectors queries read (and new documents
 * join); 'target' is the model a re-embedding is moving to. They are the same except during a switch.
 */
export function embedderFor(deps: AppDeps, config: KbConfigRow, which: 'serving' | 'target' = 'serving'): Embedder {
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
