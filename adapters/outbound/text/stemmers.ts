/**
 * Stemmers. The light stemmers receive lowercase ASCII words (diacritics are
 * already stripped). They only undo inflection (plural, gender, a few verb
 * endings), never derivation, and never leave a stem shorter than 3 letters:
 * over-stemming merges unrelated words, which costs more precision than the
 * recall it buys.
 */

const MIN_STEM = 3;

function strip(word: string, suffix: number, replacement = ''): string | null {
  const stem = word.slice(0, word.length - suffix) + replacement;
  return stem.length >= MIN_STEM ? stem : null;
}

/** After Savoy's light Spanish stemmer: plural -s/-es/-ces, then final gender vowel. */
export function stemSpanish(word: string): string {
  if (word.length < 4) return word;
  if (word.endsWith('eses')) return strip(word, 2) ?? word; // meses → mes
  if (word.endsWith('ces')) return strip(word, 3, 'z') ?? word; // luces → luz, veces → vez
  if (/[aeo]s$/.test(word)) return strip(word, 2) ?? word; // casas → cas, niños → nin
  if (/[aeo]$/.test(word)) return strip(word, 1) ?? word; // casa → cas, niño → nin
  return word;
}

/** Plural forms (-ões/-ães → -ão, -ais → -al, -eis → -el, -ois → -ol, -ns → -m, -res/-zes/-ses, -s), then final gender vowel. */
export function stemPortuguese(word: string): string {
  if (word.length < 4) return word;
  let s = word;
  if (s.endsWith('s')) {
    if (s.endsWith('oes') || s.endsWith('aes'))
      s = strip(s, 3, 'ao') ?? s; // ações → acao
    else if (s.length >= 5 && s.endsWith('ais'))
      s = strip(s, 3, 'al') ?? s; // animais → animal
    else if (s.length >= 5 && s.endsWith('eis'))
      s = strip(s, 3, 'el') ?? s; // papéis → papel, possíveis → possivel
    else if (s.length >= 5 && s.endsWith('ois'))
      s = strip(s, 3, 'ol') ?? s; // lençóis → lencol
    else if (s.endsWith('ns'))
      s = strip(s, 2, 'm') ?? s; // homens → homem
    else if (/[rzs]es$/.test(s))
      s = strip(s, 2) ?? s; // flores → flor, luzes → luz, meses → mes
    else if (!/[sui]s$/.test(s)) s = strip(s, 1) ?? s; // livros → livro (not: lápis, deus, classe's ss)
  }
  if (/[aeo]$/.test(s)) s = strip(s, 1) ?? s; // livro → livr, casa → cas
  return s;
}

/** Plural -s/-x/-aux/-eaux, then feminine/participle -e/-ee, then infinitive -er. */
export function stemFrench(word: string): string {
  if (word.length < 4) return word;
  let s = word;
  if (s.endsWith('eaux'))
    s = s.slice(0, -1); // bateaux → bateau
  else if (s.length >= 6 && s.endsWith('aux'))
    s = strip(s, 3, 'al') ?? s; // journaux → journal
  else if (/[^s][sx]$/.test(s)) s = strip(s, 1) ?? s; // maisons → maison (not: classe's ss)
  if (s.endsWith('ee'))
    s = strip(s, 2) ?? s; // aimee → aim
  else if (s.endsWith('e')) s = strip(s, 1) ?? s; // petite → petit, parle → parl
  if (s.endsWith('er')) s = strip(s, 2) ?? s; // parler → parl, premier(e) → premi
  return s;
}

const GERMAN_S_ENDING = /[bdfghklmnrt]s$/;
const GERMAN_ST_ENDING = /[bdfghklmnt]st$/;

/** Savoy's light German stemmer (as in Lucene's GermanLightStemmer), on umlaut-free input. */
export function stemGerman(word: string): string {
  let s = word;
  // Step 1: inflectional endings.
  if (s.length > 5 && s.endsWith('ern')) s = s.slice(0, -3);
  else if (s.length > 4 && /(em|en|er|es)$/.test(s)) s = s.slice(0, -2);
  else if (s.length > 3 && s.endsWith('e')) s = s.slice(0, -1);
  else if (s.length > 3 && GERMAN_S_ENDING.test(s)) s = s.slice(0, -1);
  // Step 2: comparative/superlative and verb endings.
  if (s.length > 5 && s.endsWith('est')) s = s.slice(0, -3);
  else if (s.length > 4 && /(er|en)$/.test(s)) s = s.slice(0, -2);
  else if (s.length > 5 && GERMAN_ST_ENDING.test(s)) s = s.slice(0, -2);
  return s;
}
