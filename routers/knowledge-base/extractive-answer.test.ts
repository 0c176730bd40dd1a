import { describe, expect, it } from 'vitest';
import { buildExtractiveAnswer, clipSentence, MAX_QUOTE_CHARS, splitSentences, type Passage } from './extractive-answer.ts';

const NOT_FOUND = 'I could not find anything about that in the knowledge base.';

const handbook: Passage = {
  chunkId: 'hb-12',
  fileName: 'employee-handbook.pdf',
  page: 3,
  score: 0.91,
  text: [
    'Paid Time Off',
    'Full-time employees accrue 25 days of paid vacation per calendar year. Vacation requests must be submitted',
    'through the HR portal at least two weeks in advance. Unused vacation days may be carried over until March 31',
    'of the following year.',
    '',
    'Sick leave is separate from vacation and does not require advance notice.',
  ].join('\n'),
};

const notes: Passage = {
  chunkId: 'notes-4',
  fileName: 'team-notes.md',
  page: null,
  score: 0.64,
  text: [
    '## Office logistics',
    '- The office is open from 8 a.m. to 6 p.m. on weekdays.',
    '- Parking permits are issued by Dr. Alvarez in facilities.',
    '',
    '## Time off',
    'Managers approve vacation requests within three working days. Remember to add your vacation to the team calendar!',
  ].join('\n'),
};

const pricing: Passage = {
  chunkId: 'hb-13',
  fileName: 'employee-handbook.pdf',
  page: 4,
  score: 0.4,
  text: 'Employees receive a 20% discount on all company products. The discount does not apply to gift cards.',
};

function quotes(answer: string): string[] {
  return [...answer.matchAll(/^"(.*)" \[(\d+)\]$/gm)].map((m) => `${m[2]}:${m[1]}`);
}

describe('buildExtractiveAnswer', () => {
  it('quotes the best sentence first and cites files and pages in order of appearance', () => {
    const result = buildExtractiveAnswer('How do I submit a vacation request?', [handbook, notes, pricing]);
    expect(result).toEqual({
      answer:
        'Based on the documents:\n\n' +
        '"Vacation requests must be submitted through the HR portal at least two weeks in advance." [1]\n\n' +
        '"Managers approve vacation requests within three working days." [2]\n\n' +
        'Sources: [1] employee-handbook.pdf (p. 3); [2] team-notes.md',
      cited: [handbook, notes],
      found: true,
    });
  });

  it('quotes several sentences of the best passage when they all answer', () => {
    const result = buildExtractiveAnswer('How many vacation days do full-time employees get per year?', [handbook, notes, pricing]);
    expect(result.found).toBe(true);
    const quoted = quotes(result.answer);
    expect(quoted[0]).toBe('1:Full-time employees accrue 25 days of paid vacation per calendar year.');
    expect(quoted.length).toBeGreaterThanOrEqual(2);
    expect(quoted.length).toBeLessThanOrEqual(4);
    expect(result.answer).toMatch(/\n\nSources: \[1\] employee-handbook\.pdf \(p\. 3\)(; \[2\] team-notes\.md)?$/);
    expect(result.cited[0]).toBe(handbook);
  });

  it('only ever quotes text that is in the passages', () => {
    const passages = [handbook, notes, pricing];
    const result = buildExtractiveAnswer('vacation requests approval', passages);
    const collapsed = passages.map((p) => p.text.replace(/\s+/g, ' '));
    for (const q of quotes(result.answer)) {
      const sentence = q.slice(q.indexOf(':') + 1);
      expect(collapsed.some((text) => text.includes(sentence))).toBe(true);
    }
  });

  it('keeps the original order of sentences taken from one passage', () => {
    const passage: Passage = {
      chunkId: 'p1',
      fileName: 'guide.txt',
      page: null,
      score: 1,
      text: 'Backups run nightly at 2 a.m. Unrelated sentence about lunch. Each backup is kept for 30 days before deletion.',
    };
    const result = buildExtractiveAnswer('backup retention: how long is a backup kept?', [passage]);
    expect(quotes(result.answer)).toEqual(['1:Backups run nightly at 2 a.m.', '1:Each backup is kept for 30 days before deletion.']);
    expect(result.answer).toContain('Sources: [1] guide.txt');
  });

  it('weights rarer query terms higher', () => {
    // "employees" is everywhere; "discount" is rare: the discount sentence must win.
    const passage: Passage = {
      chunkId: 'p',
      fileName: 'policy.md',
      page: null,
      score: 1,
      text: 'Employees work remotely on Fridays. Employees must wear badges. Employees get lunch vouchers. Staff receive a discount on products.',
    };
    const result = buildExtractiveAnswer('employees discount', [passage], { maxSentences: 1 });
    expect(quotes(result.answer)).toEqual(['1:Staff receive a discount on products.']);
  });

  it('prefers sentences from different passages', () => {
    const a: Passage = {
      chunkId: 'a',
      fileName: 'a.md',
      page: null,
      score: 1,
      text: 'Invoices are sent monthly. Invoices list every seat. Invoices are due in 14 days.',
    };
    const b: Passage = { chunkId: 'b', fileName: 'b.md', page: 2, score: 0.9, text: 'Overdue invoices incur a late fee.' };
    const result = buildExtractiveAnswer('invoices', [a, b], { maxSentences: 2 });
    expect(result.cited.map((p) => p.chunkId)).toEqual(['a', 'b']);
    expect(result.answer).toContain('[2] b.md (p. 2)');
  });

  it('uses one citation number per file and page', () => {
    const first: Passage = { chunkId: 'x1', fileName: 'manual.pdf', page: 7, score: 0.9, text: 'The pump must be primed before first use.' };
    const second: Passage = { chunkId: 'x2', fileName: 'manual.pdf', page: 7, score: 0.8, text: 'Priming the pump takes about two minutes.' };
    const result = buildExtractiveAnswer('how to prime the pump', [first, second]);
    expect(quotes(result.answer).every((q) => q.startsWith('1:'))).toBe(true);
    expect(result.answer.endsWith('Sources: [1] manual.pdf (p. 7)')).toBe(true);
    expect(result.cited.map((p) => p.chunkId)).toEqual(['x1']);
  });

  it('skips sentences repeated by overlapping chunks', () => {
    const a: Passage = { chunkId: 'a', fileName: 'doc.md', page: null, score: 1, text: 'The warranty covers parts for two years. Labour is not covered.' };
    const b: Passage = { chunkId: 'b', fileName: 'doc.md', page: null, score: 0.9, text: 'covers parts for two years. The warranty can be extended once.' };
    const result = buildExtractiveAnswer('warranty parts years', [a, b]);
    const quoted = quotes(result.answer);
    expect(quoted.filter((q) => q.includes('parts for two years'))).toHaveLength(1);
  });

  it('answers honestly when nothing overlaps', () => {
    const result = buildExtractiveAnswer('What is the capital of Mongolia?', [handbook, notes, pricing]);
    expect(result).toEqual({ answer: NOT_FOUND, cited: [], found: false });
  });

  it('answers honestly without passages or without meaningful query words', () => {
    expect(buildExtractiveAnswer('vacation days', [])).toEqual({ answer: NOT_FOUND, cited: [], found: false });
    expect(buildExtractiveAnswer('what is it?', [handbook])).toEqual({ answer: NOT_FOUND, cited: [], found: false });
    expect(buildExtractiveAnswer('   ', [handbook]).found).toBe(false);
    expect(buildExtractiveAnswer('vacation', [{ ...handbook, text: '   \n\n ' }]).found).toBe(false);
  });

  it('ignores case, punctuation and inflection', () => {
    const result = buildExtractiveAnswer('VACATION-REQUESTS?!  "Submitted"...', [handbook]);
    expect(result.found).toBe(true);
    expect(quotes(result.answer)[0]).toBe('1:Vacation requests must be submitted through the HR portal at least two weeks in advance.');
  });

  it('caps long sentences around the matching part with ellipses', () => {
    const filler = 'The committee reviewed several unrelated operational topics in considerable detail';
    const long = `${Array.from({ length: 6 }, () => filler).join(', ')}, and finally confirmed that the emergency generator is tested every first Monday, ${Array.from({ length: 6 }, () => filler).join(', ')}`;
    const passage: Passage = { chunkId: 'long', fileName: 'minutes.docx', page: null, score: 1, text: long };
    const result = buildExtractiveAnswer('When is the emergency generator tested?', [passage]);
    const quote = quotes(result.answer)[0]!.slice(2);
    expect(quote.length).toBeLessThanOrEqual(MAX_QUOTE_CHARS);
    expect(quote.startsWith('…')).toBe(true);
    expect(quote.endsWith('…')).toBe(true);
    expect(quote).toContain('emergency generator is tested every first Monday');
    // Cut at word boundaries: the text between the ellipses is verbatim.
    expect(long).toContain(quote.slice(1, -1));
  });

  it('leaves short sentences alone and cuts a sentence with a leading hit at the end only', () => {
    expect(clipSentence('Short sentence.', new Set(['short']))).toBe('Short sentence.');
    const text = `Generators are tested monthly ${'and the results are filed in the maintenance log '.repeat(12)}`.trim();
    const clipped = clipSentence(text, new Set(['gener', 'test']));
    expect(clipped.startsWith('Generators are tested monthly')).toBe(true);
    expect(clipped.endsWith('…')).toBe(true);
    expect(clipped.length).toBeLessThanOrEqual(MAX_QUOTE_CHARS);
  });

  it('honours maxSentences and the language option', () => {
    const one = buildExtractiveAnswer('vacation', [handbook, notes], { maxSentences: 1 });
    expect(quotes(one.answer)).toHaveLength(1);

    const es: Passage = {
      chunkId: 'es',
      fileName: 'politica.pdf',
      page: 2,
      score: 1,
      text: 'Las devoluciones se aceptan durante 30 días. El envío es gratuito.',
    };
    const spanish = buildExtractiveAnswer('¿Cuántos días para las devoluciones?', [es], { language: 'es-MX' });
    expect(spanish.answer).toBe('Según los documentos:\n\n"Las devoluciones se aceptan durante 30 días." [1]\n\nFuentes: [1] politica.pdf (p. 2)');
    expect(buildExtractiveAnswer('impuestos', [es], { language: 'es' }).answer).toBe('No encontré nada sobre eso en la base de conocimiento.');
  });
});

describe('splitSentences', () => {
  it('splits headings, list items and sentences, joins wrapped lines and spares abbreviations', () => {
    expect(splitSentences(notes.text)).toEqual([
      'Office logistics',
      'The office is open from 8 a.m. to 6 p.m. on weekdays.',
      'Parking permits are issued by Dr. Alvarez in facilities.',
      'Time off',
      'Managers approve vacation requests within three working days.',
      'Remember to add your vacation to the team calendar!',
    ]);
    expect(splitSentences(handbook.text)).toEqual([
      'Paid Time Off',
      'Full-time employees accrue 25 days of paid vacation per calendar year.',
      'Vacation requests must be submitted through the HR portal at least two weeks in advance.',
      'Unused vacation days may be carried over until March 31 of the following year.',
      'Sick leave is separate from vacation and does not require advance notice.',
    ]);
  });

  it('handles decimals, e.g., quotes, CRLF and CJK punctuation', () => {
    expect(splitSentences('Version 2.5 is current, e.g. for Linux. "Upgrade now." Then restart.\r\nDone?')).toEqual([
      'Version 2.5 is current, e.g. for Linux.',
      '"Upgrade now."',
      'Then restart.',
      'Done?',
    ]);
    expect(splitSentences('知识库已更新。请重新启动！')).toEqual(['知识库已更新。', '请重新启动！']);
    expect(splitSentences('Signed on Jan. 5 by J. Smith, Inc. staff etc. The end... or not. Wait... Really?')).toEqual([
      'Signed on Jan. 5 by J. Smith, Inc. staff etc.',
      'The end... or not.',
      'Wait...',
      'Really?',
    ]);
  });
});

describe('buildExtractiveAnswer on hostile text', () => {
  // The quadratic version ran for minutes on this input: it would now hit the test timeout.
  it('stays linear on long runs without spaces', () => {
    const text = 'x'.repeat(6000) + ' ' + Array.from({ length: 800 }, (_, i) => `w${i}.`).join(' ');
    const passages = Array.from({ length: 10 }, (_, i) => ({ chunkId: `c${i}`, text, fileName: 'a.txt', page: null, score: 1 }));
    const result = buildExtractiveAnswer('w5 w6', passages);
    expect(result.found).toBe(true);
  });

  // Retried from every dot, a run of 60,000 dots with no space after it took about a minute a passage.
  it('splits once around a long run of terminators, whether or not a space follows it', () => {
    const dots = '.'.repeat(60_000);
    expect(splitSentences(`Pricing starts here${dots}and goes on. Next one${dots} Last one.`)).toEqual([
      `Pricing starts here${dots}and goes on.`,
      `Next one${dots}`,
      'Last one.',
    ]);
    const passages = Array.from({ length: 5 }, (_, i) => ({ chunkId: `d${i}`, text: `pricing ${dots}`, fileName: 'a.txt', page: null, score: 1 }));
    expect(buildExtractiveAnswer('what is the pricing', passages).found).toBe(true);
  });
});

describe('the analysed-sentence cache', () => {
  it('answers from the text given, even when a chunk id comes back with other text', () => {
    const first = buildExtractiveAnswer('How many vacation days?', [handbook]);
    expect(first.answer).toContain('25 days of paid vacation');
    const changed = { ...handbook, text: handbook.text.replace('25 days', '30 days') };
    const second = buildExtractiveAnswer('How many vacation days?', [changed]);
    expect(second.answer).toContain('30 days of paid vacation');
    expect(second.answer).not.toContain('25 days');
    expect(buildExtractiveAnswer('How many vacation days?', [handbook]).answer).toBe(first.answer);
  });
});
