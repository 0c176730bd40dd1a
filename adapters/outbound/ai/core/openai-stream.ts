/**
 * One event of an OpenAI-compatible chat completions stream (`stream: true`): `data: {"choices":[{"delta":
 * {"content":...}}]}` chunks, an optional usage chunk, `data: [DONE]`, and `{"error": ...}` events some
 * providers send instead of a non-2xx status once the stream has started. The knowledge base's language model
 * and the connector's `openai` endpoints read it here, so both stop, count and fail on the same events.
 */
import { isRecord, readOpenAiUsage, readPath, reportedErrorText, type AiUsage } from './response.ts';
import { reportedError, type AiSource, type AiUpstreamError } from './upstream-error.ts';

/** The data of the event that ends the stream; the one event that is not JSON. */
export const OPENAI_STREAM_DONE = '[DONE]';

export type OpenAiStreamChunk =
  /** The reply is complete. */
  | { kind: 'done' }
  /** A completion chunk: its text delta (null when it carries none) and the usage it reports, if any. */
  | { kind: 'chunk'; text: string | null; usage: AiUsage | null }
  /** JSON that is neither a chunk nor an error (not an object). */
  | { kind: 'other' };

/**
 * The error a provider reported inside an answer (a 2xx body or a stream event), as the `source`'s error with
 * only `excerpt` of what it said (short, tag-free, key-free: the owner reads it, the visitor never does). A body
 * with choices is an answer, whatever else it carries.
 */
export function openAiReportedError(parsed: unknown, source: AiSource, excerpt: (text: string) => string): AiUpstreamError | null {
  if (isRecord(parsed) && 'choices' in parsed) return null;
  const raw = reportedErrorText(parsed);
  return raw === null ? null : reportedError(source, excerpt(raw));
}

/**
 * What one event says; `data` is its parsed JSON, or {@link OPENAI_STREAM_DONE} as sent. Throws the
 * {@link openAiReportedError} of an error event. The text is the provider's own: the caller redacts it.
 */
export function readOpenAiStreamChunk(data: unknown, source: AiSource, excerpt: (text: string) => string): OpenAiStreamChunk {
  if (data === OPENAI_STREAM_DONE) return { kind: 'done' };
  const error = openAiReportedError(data, source, excerpt);
  if (error !== null) throw error;
  if (!isRecord(data)) return { kind: 'other' };
  // Some servers send whole messages instead of deltas.
  const content = readPath(data, ['choices', 0, 'delta', 'content']) ?? readPath(data, ['choices', 0, 'message', 'content']);
  return { kind: 'chunk', text: typeof content === 'string' && content !== '' ? content : null, usage: readOpenAiUsage(data) };
}
