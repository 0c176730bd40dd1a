import type { AppDeps } from '../context.ts';
import type { Embedder } from '../../adapters/embeddings/embedder.ts';
import { createLocalEmbedder } from '../../adapters/embeddings/local-embedder.ts';
import { createOpenAiEmbedder } from '../../adapters/embeddings/openai-embedder.ts';
import type { AnalyzerLanguage } from './text-analysis.ts';
import type { KbConfigRow } from './repository.ts';

const localEmbedders = new Map<string, Embedder>();

/** The embedder a configuration names: the built-in local one, or an OpenAI-compatible provider. */
export function embedderFor(deps: AppDeps, config: Pick<KbConfigRow, 'embedding' | 'embedding_api_key_enc' | 'language'>): Embedder {
  const settings = config.embedding;
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
    apiKey: config.embedding_api_key_enc ? deps.secrets.open(config.embedding_api_key_enc) : undefined,
    model: settings.model,
    dimensions: settings.dimensions || undefined,
  });
}
