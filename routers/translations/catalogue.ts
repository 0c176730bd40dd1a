/**
 * UI message catalogues for the chat widget and the owner dashboard.
 *
 * Catalogues are flat `{ "message.key": "text" }` JSON files, one per language,
 * with `{name}`-style placeholders. English is the reference catalogue: every
 * resolved catalogue contains exactly the keys of `en.json`, any key missing
 * (or empty) in the chosen language falls back to the English text.
 */
import de from './catalogues/de.json' with { type: 'json' };
import en from './catalogues/en.json' with { type: 'json' };
import es from './catalogues/es.json' with { type: 'json' };
import fr from './catalogues/fr.json' with { type: 'json' };
import pt from './catalogues/pt.json' with { type: 'json' };

export const DEFAULT_LOCALE = 'en';

export const SUPPORTED_LOCALES: readonly string[] = Object.freeze(['en', 'es', 'fr', 'de', 'pt']);

export interface ResolvedCatalogue {
  /** The requested tag, normalised to canonical BCP 47 casing ('pt_br' -> 'pt-BR'). */
  requested: string;
  /** The catalogue actually used ('pt' for 'pt-BR'). */
  locale: string;
  /** Candidates in the order they were tried, ending with 'en', e.g. ['pt-BR', 'pt', 'en']. */
  fallbackChain: string[];
  /** Every key of the English catalogue, translated where a translation exists. */
  messages: Record<string, string>;
}

const RAW: Readonly<Record<string, Readonly<Record<string, unknown>>>> = { en, es, fr, de, pt };

/** Longest tag we accept; real-world tags are far shorter, this only bounds the work done on junk input. */
const MAX_TAG_LENGTH = 64;

/**
 * RFC 5646 `langtag` restricted to a 2-3 letter primary language (no extlang,
 * no grandfathered or private-use-only tags): language, script, region,
 * variants, extensions, private use.
 */
const LANGTAG =
  /^[a-z]{2,3}(?:-[a-z]{4})?(?:-(?:[a-z]{2}|\d{3}))?(?:-(?:[a-z\d]{5,8}|\d[a-z\d]{3}))*(?:-[a-wyz\d](?:-[a-z\d]{2,8})+)*(?:-x(?:-[a-z\d]{1,8})+)?$/i;

function toMessages(raw: Readonly<Record<string, unknown>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(raw)) {
    if (typeof value === 'string' && value.length > 0) out[key] = value;
  }
  return out;
}

const ENGLISH = toMessages(en);

/** Merged catalogues (language over English), restricted to English's keys; built once at module load. */
const MERGED: ReadonlyMap<string, Readonly<Record<string, string>>> = new Map(
  SUPPORTED_LOCALES.map((locale) => {
    const own = toMessages(RAW[locale] ?? {});
    const merged: Record<string, string> = {};
    for (const [key, english] of Object.entries(ENGLISH)) merged[key] = own[key] ?? english;
    return [locale, Object.freeze(merged)] as const;
  }),
);

/**
 * Validates a BCP 47 tag and returns it in canonical casing ('pt_br' -> 'pt-BR',
 * 'ZH-hant-tw' -> 'zh-Hant-TW'), or null when it is not a well-formed tag.
 * Underscores are accepted as separators (POSIX style); surrounding whitespace is ignored.
 */
export function normaliseLocaleTag(input: string): string | null {
  if (typeof input !== 'string') return null;
  const tag = input.trim().replace(/_/g, '-');
  if (tag.length === 0 || tag.length > MAX_TAG_LENGTH || !LANGTAG.test(tag)) return null;
  let afterSingleton = false;
  return tag
    .split('-')
    .map((subtag, index) => {
      const lower = subtag.toLowerCase();
      if (index === 0) return lower;
      if (subtag.length === 1) afterSingleton = true;
      if (afterSingleton) return lower;
      if (subtag.length === 2) return lower.toUpperCase();
      if (index === 1 && /^[a-z]{4}$/.test(lower)) return lower[0]!.toUpperCase() + lower.slice(1);
      return lower;
    })
    .join('-');
}

/**
 * Normalises a BCP 47 tag ('pt-BR', 'pt_br', 'EN-us') and resolves it with the
 * fallback chain exact tag -> its language -> 'en'.
 *
 * Returns null when the tag is not a well-formed locale ('../x', '', 'toolonglanguage')
 * or when neither the tag nor its language is supported ('ja', 'zz-ZZ'): callers
 * answer 404 for an unknown locale rather than silently serving English.
 * A supported language always resolves, whatever its region/script/extensions.
 */
export function resolveCatalogue(locale: string): ResolvedCatalogue | null {
  const requested = normaliseLocaleTag(locale);
  if (requested === null) return null;
  const language = requested.split('-')[0]!;
  const fallbackChain = [...new Set([requested, language, DEFAULT_LOCALE])];
  const chosen = [requested, language].find((candidate) => MERGED.has(candidate));
  if (chosen === undefined) return null;
  const messages = MERGED.get(chosen)!;
  return { requested, locale: chosen, fallbackChain, messages: { ...messages } };
}
