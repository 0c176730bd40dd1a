import { describe, expect, it } from 'vitest';
import { Bm25Index, bm25Idf } from './bm25.ts';
import { stemFrench, stemGerman, stemPortuguese, stemSpanish } from './stemmers.ts';
import { STOP_WORDS } from './stop-words.ts';
import { analyze, analyzeTokens, termFrequencies } from './text-analysis.ts';
import { normalizeText, tokenize } from './word-tokens.ts';
import { countTokens } from './tokens.ts';

describe('analyze', () => {
  it('stems English with Porter', () => {
    expect(analyze('running')).toEqual(['run']);
    const [studies] = analyze('studies');
    const [studying] = analyze('studying');
    expect(studies).toBe(studying);
    expect(analyze('connections connected connecting')).toEqual(['connect', 'connect', 'connect']);
  });

  it('removes stop words and one-character tokens', () => {
    expect(analyze('The cat is on the mat, and a dog is in the garden')).toEqual(['cat', 'mat', 'dog', 'garden']);
    expect(analyze('to be or not to be')).toEqual([]);
    // Contraction fragments left by splitting on the apostrophe are stop words too.
    expect(analyze("don't you isn't it")).toEqual([]);
  });

  it('strips diacritics and normalises compatibility forms', () => {
    expect(analyze('café', 'other')).toEqual(['cafe']);
    expect(analyze('Crème Brûlée', 'other')).toEqual(['creme', 'brulee']);
    expect(analyze('Straße', 'other')).toEqual(['strasse']);
    expect(analyze('ＦＵＬＬ ﬁle', 'other')).toEqual(['full', 'file']);
    expect(normalizeText('İSTANBUL Ångström')).toBe('istanbul angstrom');
  });

  it('keeps numbers and alphanumeric tokens verbatim', () => {
    expect(analyze('COVID19 cases in 2019 and covid-19')).toEqual(['covid19', 'case', '2019', 'covid', '19']);
    expect(analyze('1,000 users paid 3.14')).toEqual(['1000', 'user', 'paid', '314']);
    expect(analyze('mp3 players')).toEqual(['mp3', 'player']);
  });

  it('is case-insensitive and splits on punctuation', () => {
    expect(analyze('Hello-World! HELLO_world')).toEqual(analyze('hello world hello world'));
    expect(analyze('')).toEqual([]);
    expect(analyze('  ,.;!?  ')).toEqual([]);
  });

  it('uses no stop words and no stemming for "other"', () => {
    expect(analyze('the running dogs', 'other')).toEqual(['the', 'running', 'dogs']);
  });

  it("remembers terms per language: one language's stop words and stems never leak into another", () => {
    for (let round = 0; round < 2; round++) {
      expect(analyze('the running dogs', 'en')).toEqual(['run', 'dog']);
      expect(analyze('the running dogs', 'other')).toEqual(['the', 'running', 'dogs']);
      expect(analyze('los perros corriendo', 'es')).toEqual(analyze('perro corriendo', 'es'));
      expect(analyzeTokens(tokenize('The running dogs'), 'en')).toEqual(analyze('the running dogs', 'en'));
    }
  });

  it('splits CJK runs into overlapping bigrams', () => {
    expect(tokenize('知识库 search')).toEqual(['知识', '识库', 'search']);
    expect(tokenize('库')).toEqual(['库']);
  });

  it('drops absurdly long tokens', () => {
    expect(analyze(`${'a'.repeat(65)} real`)).toEqual(['real']);
  });

  it('applies the light stemmers conservatively', () => {
    // Spanish: singular and plural meet, short words are left alone.
    expect(stemSpanish('casas')).toBe(stemSpanish('casa'));
    expect(stemSpanish('niños'.normalize('NFKD').replace(/\p{M}/gu, ''))).toBe(stemSpanish('nino'));
    expect(stemSpanish('luces')).toBe('luz');
    expect(stemSpanish('tres')).toBe('tres');
    expect(analyze('Las casas blancas', 'es')).toEqual(analyze('la casa blanca', 'es'));
    // French
    expect(stemFrench('chevaux')).toBe('cheval');
    expect(stemFrench('bateaux')).toBe('bateau');
    expect(stemFrench('petites')).toBe(stemFrench('petit'));
    expect(analyze('parler, parlé, parle', 'fr')).toEqual(['parl', 'parl', 'parl']);
    // German (umlauts and ß are folded before stemming)
    expect(analyze('Häuser Hauses Haus', 'de')).toEqual(['haus', 'haus', 'haus']);
    expect(stemGerman('kindern')).toBe(stemGerman('kinder'));
    expect(stemGerman('ab')).toBe('ab');
    // Portuguese
    expect(analyze('ações ação', 'pt')).toEqual(['aca', 'aca']);
    expect(stemPortuguese('animais')).toBe(stemPortuguese('animal'));
    expect(stemPortuguese('homens')).toBe('homem');
    expect(stemPortuguese('flores')).toBe(stemPortuguese('flor'));
  });

  it('has real stop-word lists in normalised form', () => {
    expect(STOP_WORDS.en.size).toBeGreaterThanOrEqual(150);
    for (const lang of ['es', 'fr', 'de', 'pt'] as const) expect(STOP_WORDS[lang].size).toBeGreaterThanOrEqual(100);
    expect(STOP_WORDS.en.has('the')).toBe(true);
    expect(STOP_WORDS.es.has('mas')).toBe(true); // más
    expect(STOP_WORDS.fr.has('ete')).toBe(true); // été
    expect(STOP_WORDS.de.has('uber')).toBe(true); // über
    expect(STOP_WORDS.de.has('dass')).toBe(true); // daß
    expect(analyze('El perro y el gato', 'es')).toEqual(['perr', 'gat']);
  });
});

describe('termFrequencies', () => {
  it('counts in order of first occurrence', () => {
    expect([...termFrequencies(['b', 'a', 'b', 'c', 'b'])]).toEqual([
      ['b', 3],
      ['a', 1],
      ['c', 1],
    ]);
    expect(termFrequencies([]).size).toBe(0);
  });
});

describe('Bm25Index', () => {
  const corpus: Record<string, string> = {
    pw: 'To reset your password, open Settings, choose Security and click "Reset password".',
    billing: 'Invoices are sent monthly. Payment is due within 30 days of the invoice date.',
    shipping: 'Orders ship within two business days. International shipping takes longer.',
    api: 'Use the API key from your dashboard to authenticate requests to the REST API.',
  };

  function indexOf(entries: Record<string, string>, options?: ConstructorParameters<typeof Bm25Index>[0]): Bm25Index {
    const index = new Bm25Index(options);
    for (const [id, text] of Object.entries(entries)) index.add(id, text);
    return index;
  }

  it('ranks the obviously relevant document first', () => {
    const index = indexOf(corpus);
    expect(index.size).toBe(4);
    expect(index.search('how do I reset my password', 10)[0]?.id).toBe('pw');
    expect(index.search('when is the invoice payment due', 10)[0]?.id).toBe('billing');
    expect(index.search('authenticating API requests', 10)[0]?.id).toBe('api');
    expect(index.search('ship internationally', 10).map((hit) => hit.id)).toEqual(['shipping']);
  });

  it('returns only matching documents, at most limit, scores descending', () => {
    const index = indexOf(corpus);
    const hits = index.search('password invoice shipping', 2);
    expect(hits).toHaveLength(2);
    expect(hits[0]!.score).toBeGreaterThanOrEqual(hits[1]!.score);
    expect(index.search('password', 10).map((hit) => hit.id)).toEqual(['pw']);
    expect(index.search('password', 0)).toEqual([]);
  });

  it('returns [] for an empty or stop-word-only query and an empty index', () => {
    const index = indexOf(corpus);
    expect(index.search('', 10)).toEqual([]);
    expect(index.search('   ', 10)).toEqual([]);
    expect(index.search('the and of', 10)).toEqual([]);
    expect(new Bm25Index().search('password', 10)).toEqual([]);
  });

  it('lets rare terms outweigh common ones (idf)', () => {
    const index = indexOf(
      {
        rare: 'zebra stripes',
        b: 'common stripes',
        c: 'common spots',
        d: 'common dots',
      },
      { language: 'other' },
    );
    // Each document matches exactly one query term once, with equal lengths:
    // only idf separates them, and 'zebra' (df 1) beats 'common' (df 3).
    const hits = index.search('common zebra', 10);
    expect(hits[0]?.id).toBe('rare');
    expect(hits[0]!.score).toBeGreaterThan(2 * hits[1]!.score);
    expect(bm25Idf(4, 1)).toBeGreaterThan(bm25Idf(4, 4));
    expect(bm25Idf(4, 4)).toBeGreaterThan(0);
  });

  it('normalises by document length', () => {
    const index = indexOf(
      {
        short: 'solar panel',
        long: 'solar panel installation guide covering wiring inverters batteries permits roofs warranties',
      },
      { language: 'other' },
    );
    const hits = index.search('solar', 10);
    expect(hits.map((hit) => hit.id)).toEqual(['short', 'long']);
    expect(hits[0]!.score).toBeGreaterThan(hits[1]!.score);

    // With b = 0 there is no length normalisation: equal tf → equal score (ties by id).
    const flat = indexOf({ short: 'solar panel', long: 'solar panel plus many other words here' }, { b: 0, language: 'other' });
    const [x, y] = flat.search('solar', 10);
    expect(x!.score).toBe(y!.score);
    expect([x!.id, y!.id]).toEqual(['long', 'short']);
  });

  it('saturates term frequency', () => {
    const index = indexOf({ one: 'rust', five: 'rust rust rust rust rust', other: 'go' }, { language: 'other', b: 0 });
    const [five, one] = index.search('rust', 10);
    expect(five!.id).toBe('five');
    // tf·(k1+1)/(tf+k1) is bounded by k1+1: five occurrences score < 2× one.
    expect(five!.score / one!.score).toBeLessThan(2);
  });

  it('computes exact scores on a toy corpus (k1 = 0.9, b = 0.4)', () => {
    const index = indexOf(
      {
        a: 'apple banana apple', // |D| = 3, tf(apple) = 2
        b: 'banana cherry', // |D| = 2, tf(cherry) = 1
        c: 'cherry cherry cherry durian', // |D| = 4, tf(cherry) = 3
      },
      { language: 'other', k1: 0.9, b: 0.4 },
    );
    // N = 3, avgdl = (3 + 2 + 4) / 3 = 3
    // idf(apple)  = ln(1 + (3 − 1 + 0.5)/(1 + 0.5)) = ln(8/3)  ≈ 0.980829
    // idf(cherry) = ln(1 + (3 − 2 + 0.5)/(2 + 0.5)) = ln(1.6)  ≈ 0.470004
    const idfApple = Math.log(8 / 3);
    const idfCherry = Math.log(1.6);
    // a: tf = 2, K = 0.9·(0.6 + 0.4·3/3) = 0.9   → 2·1.9/(2 + 0.9)  = 3.8/2.9
    // b: tf = 1, K = 0.9·(0.6 + 0.4·2/3) = 0.78  → 1·1.9/(1 + 0.78) = 1.9/1.78
    // c: tf = 3, K = 0.9·(0.6 + 0.4·4/3) = 1.02  → 3·1.9/(3 + 1.02) = 5.7/4.02
    const expected = [
      { id: 'a', score: idfApple * (3.8 / 2.9) }, // ≈ 1.285224
      { id: 'c', score: idfCherry * (5.7 / 4.02) }, // ≈ 0.666424
      { id: 'b', score: idfCherry * (1.9 / 1.78) }, // ≈ 0.501690
    ];
    const hits = index.search('apple cherry', 10);
    expect(hits.map((hit) => hit.id)).toEqual(['a', 'c', 'b']);
    hits.forEach((hit, i) => expect(hit.score).toBeCloseTo(expected[i]!.score, 12));
    expect(hits[0]!.score).toBeCloseTo(1.285224, 5);
    expect(hits[1]!.score).toBeCloseTo(0.666424, 5);
    expect(hits[2]!.score).toBeCloseTo(0.50169, 5);

    // A repeated query term counts once per occurrence (qtf).
    const doubled = index.search('apple apple', 10);
    expect(doubled[0]!.score).toBeCloseTo(2 * idfApple * (3.8 / 2.9), 12);
  });

  it('replaces a document added twice and supports removal', () => {
    const index = new Bm25Index({ language: 'other' });
    index.add('x', 'alpha');
    index.add('x', 'beta');
    expect(index.size).toBe(1);
    expect(index.search('alpha', 10)).toEqual([]);
    expect(index.search('beta', 10).map((hit) => hit.id)).toEqual(['x']);
    expect(index.remove('x')).toBe(true);
    expect(index.size).toBe(0);
    expect(index.documentFrequency('beta')).toBe(0);
  });

  it('rejects invalid parameters', () => {
    expect(() => new Bm25Index({ b: 1.5 })).toThrow(RangeError);
    expect(() => new Bm25Index({ k1: -1 })).toThrow(RangeError);
  });
});

describe('countTokens', () => {
  it('counts o200k tokens and treats special-token text as plain text', () => {
    expect(countTokens('')).toBe(0);
    expect(countTokens('hello world')).toBe(2);
    expect(countTokens('<|endoftext|>')).toBeGreaterThan(1);
  });
});

describe('tokenize, ASCII fast path', () => {
  // The general rules as regular expressions (what the one-pass ASCII scan must reproduce exactly).
  const reference = (text: string) =>
    text
      .toLowerCase()
      .replace(/(?<=\p{Nd})[.,](?=\p{Nd})/gu, '')
      .split(/[^\p{L}\p{M}\p{N}]+/u)
      .filter((t) => t.length >= 2 && t.length <= 64);

  it('gives the tokens of the general rules on any ASCII text', async () => {
    const fc = (await import('fast-check')).default;
    const alphabet = fc.constantFrom(...'aZ09 .,-_\n\t:;!?()[]/\\\'"@#%&*+=<>|~`$^'.split(''), 'x', 'Q', '5', '.', ',');
    fc.assert(
      fc.property(fc.array(alphabet, { maxLength: 80 }), (chars) => {
        const text = chars.join('');
        expect(tokenize(text)).toEqual(reference(text));
      }),
      { numRuns: 2_000 },
    );
    expect(tokenize('Costs 1,000.50 USD, v2.0; Ab.Cd 3. 4')).toEqual(['costs', '100050', 'usd', 'v20', 'ab', 'cd']);
    expect(tokenize(`${'a'.repeat(65)} ok`)).toEqual(['ok']);
  });
});
