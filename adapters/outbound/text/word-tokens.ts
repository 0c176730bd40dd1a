/**
 * Steps 1-4 of the analysis pipeline (text-analysis.ts): normalisation and word tokens, the part every language
 * shares. Fast paths for ASCII text, which is most of what is indexed and asked.
 */

const MAX_TOKEN_LENGTH = 64;

// The combining-mark blocks NFKD splits off accented Latin/Greek/Cyrillic letters.
const DIACRITICS = /[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]/g;
const FOLDINGS: Record<string, string> = {
  ß: 'ss',
  æ: 'ae',
  œ: 'oe',
  ø: 'o',
  ł: 'l',
  đ: 'd',
  ð: 'd',
  þ: 'th',
  ı: 'i',
  ſ: 's',
};
const FOLDABLE = /[ßæœøłđðþıſ]/g;
const NON_ASCII = /[^\x00-\x7f]/;
const DIGIT_GROUP_SEPARATOR = /(?<=\p{Nd})[.,](?=\p{Nd})/gu;
const TOKEN_SEPARATOR = /[^\p{L}\p{M}\p{N}]+/u;
const CJK_CHAR = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\u30fc]/u;
const CJK_RUNS = /([\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\u30fc]+)|([^\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\u30fc]+)/gu;
// The digit-group rule restricted to ASCII: Unicode property classes cost several times more per character.
const ASCII_DIGIT_GROUP_SEPARATOR = /(?<=[0-9])[.,](?=[0-9])/g;

/** Step 1-2 of the pipeline: the normalised, lowercased form of `text`. */
export function normalizeText(text: string): string {
  let s: string;
  if (NON_ASCII.test(text)) {
    s = text
      .normalize('NFKD')
      .toLowerCase()
      .replace(DIACRITICS, '')
      .replace(FOLDABLE, (c) => FOLDINGS[c] ?? c);
    if (NON_ASCII.test(s)) s = s.normalize('NFC');
  } else {
    return text.toLowerCase().replace(ASCII_DIGIT_GROUP_SEPARATOR, '');
  }
  return s.replace(DIGIT_GROUP_SEPARATOR, '');
}

/**
 * Steps 1-4: normalised word tokens, in order, before stop-word removal and
 * stemming. (The embedder falls back to these when a text is nothing but
 * stop words.)
 */
export function tokenize(text: string): string[] {
  const out: string[] = [];
  if (!NON_ASCII.test(text)) {
    tokenizeAscii(text.toLowerCase(), out);
    return out;
  }
  const normalized = normalizeText(text);
  if (!NON_ASCII.test(normalized)) {
    tokenizeAscii(normalized, out);
    return out;
  }
  for (const raw of normalized.split(TOKEN_SEPARATOR)) {
    if (raw === '') continue;
    if (CJK_CHAR.test(raw)) pushMixedCjk(raw, out);
    else pushToken(raw, out);
  }
  return out;
}

const isAsciiDigit = (code: number) => code >= 48 && code <= 57;
const isAsciiWordChar = (code: number) => (code >= 97 && code <= 122) || isAsciiDigit(code);

/**
 * The ASCII case of steps 2-4 in one pass over lowercased text: runs of [a-z0-9] are tokens, and a `.` or `,`
 * between two digits is dropped (a digit group separator), as DIGIT_GROUP_SEPARATOR and TOKEN_SEPARATOR do.
 */
function tokenizeAscii(lower: string, out: string[]): void {
  let token = '';
  let start = -1;
  for (let i = 0; i <= lower.length; i++) {
    const code = i < lower.length ? lower.charCodeAt(i) : -1;
    if (isAsciiWordChar(code)) {
      if (start < 0) start = i;
      continue;
    }
    if ((code === 46 || code === 44) && start >= 0 && isAsciiDigit(lower.charCodeAt(i - 1)) && isAsciiDigit(lower.charCodeAt(i + 1))) {
      token += lower.slice(start, i);
      start = i + 1;
      continue;
    }
    if (start >= 0) {
      pushToken(token + lower.slice(start, i), out);
      token = '';
      start = -1;
    }
  }
}

function pushToken(token: string, out: string[]): void {
  if (token.length < 2 || token.length > MAX_TOKEN_LENGTH) return;
  out.push(token);
}

function pushMixedCjk(raw: string, out: string[]): void {
  for (const match of raw.matchAll(CJK_RUNS)) {
    const cjk = match[1];
    if (cjk === undefined) {
      pushToken(match[2] ?? '', out);
      continue;
    }
    const chars = Array.from(cjk);
    if (chars.length === 1) {
      out.push(cjk);
      continue;
    }
    for (let i = 0; i + 1 < chars.length; i++) out.push(`${chars[i]}${chars[i + 1]}`);
  }
}
