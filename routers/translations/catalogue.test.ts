import { afterEach, describe, expect, it, vi } from 'vitest';
import de from './catalogues/de.json' with { type: 'json' };
import en from './catalogues/en.json' with { type: 'json' };
import es from './catalogues/es.json' with { type: 'json' };
import fr from './catalogues/fr.json' with { type: 'json' };
import pt from './catalogues/pt.json' with { type: 'json' };
import { normaliseLocaleTag, resolveCatalogue, SUPPORTED_LOCALES } from './catalogue.ts';

const catalogues: Record<string, Record<string, unknown>> = { en, es, fr, de, pt };
const translations = Object.entries(catalogues).filter(([locale]) => locale !== 'en');
const englishKeys = Object.keys(en).sort();

const placeholders = (text: unknown): string[] => [...String(text).matchAll(/\{([^{}]*)\}/g)].map((match) => match[1] ?? '').sort();

describe('catalogue files', () => {
  it('has one catalogue per supported locale', () => {
    expect(Object.keys(catalogues).sort()).toEqual([...SUPPORTED_LOCALES].sort());
    expect(SUPPORTED_LOCALES).toEqual(['en', 'es', 'fr', 'de', 'pt']);
  });

  it('covers the widget and dashboard messages', () => {
    expect(englishKeys.length).toBeGreaterThanOrEqual(55);
    for (const key of ['chat.placeholder', 'chat.error.rateLimited', 'apiKeys.copyOnce', 'tour.step4', 'errors.forbidden']) {
      expect(englishKeys).toContain(key);
    }
    expect(en['chat.placeholder']).toBe('Type your message...');
  });

  it.each(Object.entries(catalogues))('%s: non-empty string values only', (_locale, messages) => {
    for (const [key, value] of Object.entries(messages)) {
      expect(typeof value, key).toBe('string');
      expect((value as string).trim().length, key).toBeGreaterThan(0);
    }
  });

  it.each(translations)('%s: exactly the keys of en (none missing, none extra)', (_locale, messages) => {
    expect(Object.keys(messages).sort()).toEqual(englishKeys);
  });

  it.each(translations)('%s: identical {placeholders} to en', (_locale, messages) => {
    for (const key of englishKeys) {
      expect(placeholders(messages[key]), key).toEqual(placeholders(en[key as keyof typeof en]));
    }
  });

  it('only uses well-formed {identifier} placeholders', () => {
    for (const [locale, messages] of Object.entries(catalogues)) {
      for (const [key, value] of Object.entries(messages)) {
        for (const name of placeholders(value)) expect(name, `${locale} ${key}`).toMatch(/^[A-Za-z][A-Za-z0-9]*$/);
      }
    }
  });

  it.each(translations)('%s: is actually translated (at least 80% of values differ from en)', (_locale, messages) => {
    const differing = englishKeys.filter((key) => messages[key] !== en[key as keyof typeof en]);
    expect(differing.length / englishKeys.length).toBeGreaterThanOrEqual(0.8);
  });
});

describe('normaliseLocaleTag', () => {
  it.each([
    ['pt-BR', 'pt-BR'],
    ['pt_br', 'pt-BR'],
    ['EN-us', 'en-US'],
    [' de ', 'de'],
    ['ZH_hant_tw', 'zh-Hant-TW'],
    ['es-419', 'es-419'],
    ['de-DE-1901', 'de-DE-1901'],
    ['pt-BR-u-CA-gregory-x-Foo', 'pt-BR-u-ca-gregory-x-foo'],
  ])('%j -> %j', (input, expected) => {
    expect(normaliseLocaleTag(input)).toBe(expected);
  });
});

describe('resolveCatalogue', () => {
  it('resolves a supported language directly', () => {
    const resolved = resolveCatalogue('fr');
    expect(resolved).toMatchObject({ requested: 'fr', locale: 'fr', fallbackChain: ['fr', 'en'] });
    expect(resolved?.messages['chat.send']).toBe(fr['chat.send']);
  });

  it('resolves en itself', () => {
    expect(resolveCatalogue('en')).toMatchObject({ requested: 'en', locale: 'en', fallbackChain: ['en'] });
  });

  it('falls back from a region tag to its language', () => {
    const resolved = resolveCatalogue('pt-BR');
    expect(resolved).toMatchObject({ requested: 'pt-BR', locale: 'pt', fallbackChain: ['pt-BR', 'pt', 'en'] });
    expect(resolved?.messages['chat.placeholder']).toBe(pt['chat.placeholder']);
  });

  it.each([
    ['pt_br', 'pt-BR', 'pt'],
    ['PT-br', 'pt-BR', 'pt'],
    ['EN-us', 'en-US', 'en'],
    ['en_GB', 'en-GB', 'en'],
    ['DE', 'de', 'de'],
    ['es-419', 'es-419', 'es'],
  ])('normalises case and underscores: %j', (input, requested, locale) => {
    const resolved = resolveCatalogue(input);
    expect(resolved?.requested).toBe(requested);
    expect(resolved?.locale).toBe(locale);
    expect(resolved?.fallbackChain.at(-1)).toBe('en');
  });

  it('returns every en key for every supported locale', () => {
    for (const locale of SUPPORTED_LOCALES) {
      expect(Object.keys(resolveCatalogue(locale)?.messages ?? {}).sort()).toEqual(englishKeys);
    }
  });

  it('returns a fresh messages object (callers cannot corrupt the cache)', () => {
    const first = resolveCatalogue('de')!;
    first.messages['chat.send'] = 'hacked';
    expect(resolveCatalogue('de')?.messages['chat.send']).toBe(de['chat.send']);
  });

  it.each(['ja', 'zz-ZZ', 'ja-JP', 'und', 'ru_RU'])('returns null for a valid but unsupported locale: %j', (tag) => {
    expect(normaliseLocaleTag(tag)).not.toBeNull();
    expect(resolveCatalogue(tag)).toBeNull();
  });

  it.each([
    '',
    '   ',
    '../x',
    '../../etc/passwd',
    'en/../../x',
    'en\u0000',
    'toolonglanguage',
    'x'.repeat(50),
    'e',
    'en-',
    'en--US',
    '-en',
    'en-US-',
    'x-private',
    'en.json',
    'en US',
    `en-${'a'.repeat(70)}`,
  ])('returns null for a malformed tag: %j', (tag) => {
    expect(resolveCatalogue(tag)).toBeNull();
  });

  it('returns null for non-string input at runtime', () => {
    expect(resolveCatalogue(undefined as unknown as string)).toBeNull();
    expect(resolveCatalogue(42 as unknown as string)).toBeNull();
  });
});

describe('merging with en', () => {
  afterEach(() => {
    vi.doUnmock('./catalogues/pt.json');
    vi.resetModules();
  });

  it('fills keys missing (or empty) in a language from en and drops keys en does not have', async () => {
    const partial: Record<string, string> = { ...pt, 'chat.sources': '', 'legacy.key': 'obsoleto' };
    delete partial['chat.send'];
    vi.resetModules();
    vi.doMock('./catalogues/pt.json', () => ({ default: partial }));
    const { resolveCatalogue: resolveFresh } = await import('./catalogue.ts');

    const resolved = resolveFresh('pt-BR');
    expect(resolved?.locale).toBe('pt');
    expect(resolved?.messages['chat.send']).toBe(en['chat.send']);
    expect(resolved?.messages['chat.sources']).toBe(en['chat.sources']);
    expect(resolved?.messages['chat.placeholder']).toBe(pt['chat.placeholder']);
    expect(resolved?.messages).not.toHaveProperty('legacy.key');
    expect(Object.keys(resolved?.messages ?? {}).sort()).toEqual(englishKeys);
  });
});
