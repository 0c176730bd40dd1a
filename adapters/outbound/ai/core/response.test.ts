import { describe, expect, it } from 'vitest';
import { createReplyRedactor, redactReply, requestSecrets, withoutMarkup } from './response.ts';

const KEY = 'upstream-secret-key-1234567890';

/** What a visitor would read: every piece pushed in order, then the end. */
function streamed(apiKey: string | undefined, pieces: string[]): { emitted: string[]; text: string } {
  const redactor = createReplyRedactor(apiKey);
  const emitted = pieces.map((piece) => redactor.push(piece));
  emitted.push(redactor.end());
  return { emitted, text: emitted.join('') };
}

describe('redactReply', () => {
  it('replaces the key, raw and URL-encoded, in a complete reply', () => {
    const key = 'sk/with+special=chars';
    expect(redactReply(`a ${key} b ${encodeURIComponent(key)} c`, key)).toBe('a [redacted] b [redacted] c');
  });

  it('drops NUL first, so a key with NULs inside is still found', () => {
    expect(redactReply(`key: ${KEY.slice(0, 6)}\u0000${KEY.slice(6)}`, KEY)).toBe('key: [redacted]');
  });
});

describe('createReplyRedactor', () => {
  it('catches the key split between two pieces at every position', () => {
    const reply = `your key is Bearer ${KEY}, keep it safe`;
    const start = reply.indexOf(KEY);
    for (let split = start + 1; split < start + KEY.length; split++) {
      const { emitted, text } = streamed(KEY, [reply.slice(0, split), reply.slice(split)]);
      expect(text).toBe('your key is Bearer [redacted], keep it safe');
      for (const piece of emitted) expect(piece).not.toContain(KEY.slice(0, 4));
    }
  });

  it('catches the key spread over many one-character pieces, and the URL-encoded key', () => {
    const key = 'sk/with+special=chars';
    const reply = `raw ${key} encoded ${encodeURIComponent(key)} end`;
    expect(streamed(key, Array.from(reply)).text).toBe('raw [redacted] encoded [redacted] end');
  });

  it('holds back only an end that begins the key, and gives it back when the key does not follow', () => {
    const redactor = createReplyRedactor(KEY);
    expect(redactor.push('plain words stream at once')).toBe('plain words stream at once');
    expect(redactor.push(', then upstream-sec')).toBe(', then ');
    expect(redactor.push('ond thoughts')).toBe('upstream-second thoughts');
    expect(redactor.push(' and up')).toBe(' and ');
    expect(redactor.end()).toBe('up');
  });

  it('redacts occurrences that overlap as split would, leaving no key in what the visitor reads', () => {
    // A key that begins as it ends: the second echo starts inside the first.
    const key = 'abab';
    const { text } = streamed(key, ['xabab', 'ab', 'aby']);
    expect(text).toBe('x[redacted][redacted]y');
    expect(text).not.toContain(key);
  });

  it('holds nothing back without a key (or with one too short to redact)', () => {
    expect(streamed(undefined, ['Hel', 'lo']).emitted).toEqual(['Hel', 'lo', '']);
    expect(streamed('abc', ['ab', 'c']).emitted).toEqual(['ab', 'c', '']);
  });
});

describe('requestSecrets', () => {
  it('adds the credentials typed into the URL: user, password and the values of parameters named like a key', () => {
    const url = 'https://bot-user:pa%24%24word-123@api.example.com/chat?api_key=query-key-98765&model=gpt-4o-mini&access_token=tok-abcdefgh&sig=s1';
    expect(requestSecrets('sk-header-key', url)).toEqual(['sk-header-key', 'bot-user', 'pa%24%24word-123', 'pa$$word-123', 'query-key-98765', 'tok-abcdefgh']);
  });

  it('keeps a value as written and decoded, so an echo of either is caught (`+`, `/` and escapes in base64 keys)', () => {
    const secrets = requestSecrets(undefined, 'https://h.example/v1?api_key=ab+cd/ef0123==&sig=AbC%2fdef%2bghij');
    expect(secrets).toEqual(['ab+cd/ef0123==', 'ab cd/ef0123==', 'AbC%2fdef%2bghij', 'AbC/def+ghij']);
    expect(redactReply('GET /v1?api_key=ab+cd/ef0123==&sig=AbC%2fdef%2bghij', secrets)).toBe('GET /v1?api_key=[redacted]&sig=[redacted]');
  });

  it('leaves out ordinary parameters, credentials too short to look for, and URLs that do not parse', () => {
    expect(requestSecrets(undefined, 'https://api.example.com/v1?model=gpt-4o-mini-2024&key=short')).toEqual([]);
    expect(requestSecrets('sk-1', 'not a url ?key=abcdefghijkl')).toEqual(['sk-1']);
  });

  it('redacts every secret, raw or URL-encoded, a longer one whole before a shorter one inside it', () => {
    const secrets = requestSecrets('abcd1234', 'https://h.example/x?token=abcd1234-and-more');
    expect(redactReply('a abcd1234-and-more b abcd1234 c', secrets)).toBe('a [redacted] b [redacted] c');
    const redactor = createReplyRedactor(requestSecrets(undefined, 'https://h.example/?key=sp%20ace%2Fkey'));
    expect(redactor.push('echo sp%20ace%2Fkey and sp ace/k') + redactor.push('ey') + redactor.end()).toBe('echo [redacted] and [redacted]');
  });
});

describe('withoutMarkup', () => {
  it("keeps an error page's words and drops its head, scripts, styles, comments and tags", () => {
    const page =
      '<!DOCTYPE html><html><head><title>x</title><style>p{color:red}</style></head><body><!-- trace 42 -->' +
      '<script type="text/javascript">var secret = 1;</script><h1>502 Bad Gateway</h1><p>nginx</p></body></html>';
    expect(withoutMarkup(page).replace(/\s+/g, ' ').trim()).toBe('502 Bad Gateway nginx');
  });

  it('keeps what follows an opening with no closing part after it', () => {
    expect(withoutMarkup('<b>a</b> <!-- b').replace(/\s+/g, ' ').trim()).toBe('a <!-- b');
    expect(withoutMarkup('a <script>b').replace(/\s+/g, ' ').trim()).toBe('a b');
    expect(withoutMarkup('a <p b').trim()).toBe('a <p b');
  });

  // Each of these took well over the test timeout when every opening was searched to the end.
  it('reads 300,000 characters of unclosed openings in one pass', () => {
    for (const opening of ['<a', '<!--', '<script', '<style x=1>']) {
      const text = `start ${opening.repeat(Math.floor(300_000 / opening.length))} end`;
      expect(withoutMarkup(text).startsWith('start ')).toBe(true);
    }
  });
});
