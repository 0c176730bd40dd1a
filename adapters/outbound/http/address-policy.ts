/**
 * Pure address policy for outbound requests (SSRF guard).
 *
 * parseIpLiteral turns every textual spelling of an IP address that a URL
 * parser or inet_aton would accept into one canonical form, so that the
 * policy in isPublicAddress cannot be bypassed by an unusual spelling.
 * isPublicAddress is an allow-list in spirit: anything it cannot positively
 * classify as public unicast is refused.
 */

type ParsedIp = { version: 4; value: number } | { version: 6; pieces: number[] };

/**
 * Parses any textual host spelling into a canonical IP (v4 dotted or v6) or
 * returns null if it is a hostname. Same semantics as WHATWG URL host parsing
 * / inet_aton, plus IPv6 zone ids (stripped).
 */
export function parseIpLiteral(host: string): string | null {
  const parsed = parseIp(host);
  if (parsed === null) return null;
  return parsed.version === 4 ? formatIPv4(parsed.value) : formatIPv6(parsed.pieces);
}

/** true when the IP (canonical form) is a public unicast address we may connect to. */
export function isPublicAddress(ip: string): boolean {
  // Fail closed: anything that is not a parseable IP is not a public address.
  const parsed = parseIp(ip);
  if (parsed === null) return false;
  return parsed.version === 4 ? isPublicIPv4(parsed.value) : isPublicIPv6(parsed.pieces);
}

// ---------------------------------------------------------------------------
// Parsing

function parseIp(input: string): ParsedIp | null {
  let host = input.trim();
  if (host.length === 0) return null;

  if (host.startsWith('[')) {
    // Brackets only ever enclose IPv6; anything else inside them is not an IP.
    if (!host.endsWith(']')) return null;
    const pieces = parseIPv6(host.slice(1, -1));
    return pieces === null ? null : { version: 6, pieces };
  }

  if (host.includes(':')) {
    const pieces = parseIPv6(host);
    return pieces === null ? null : { version: 6, pieces };
  }

  // URL hosts are percent-decoded and IDNA-mapped before IPv4 parsing, so
  // '%31%32%37.0.0.1' and fullwidth digits/dots are 127.0.0.1 as well.
  if (host.includes('%')) {
    try {
      host = decodeURIComponent(host);
    } catch {
      return null;
    }
  }
  host = host
    .normalize('NFKC')
    .replace(/[\u3002\uff0e\uff61]/g, '.')
    .toLowerCase();

  if (!endsInANumber(host)) return null;
  const value = parseIPv4(host);
  return value === null ? null : { version: 4, value };
}

/** WHATWG "ends in a number": decides whether a host must be parsed as IPv4. */
function endsInANumber(host: string): boolean {
  const parts = host.split('.');
  if (parts[parts.length - 1] === '') {
    if (parts.length === 1) return false;
    parts.pop();
  }
  const last = parts[parts.length - 1] ?? '';
  if (last !== '' && /^[0-9]+$/.test(last)) return true;
  return parseIPv4Number(last) !== null;
}

/** One inet_aton component: decimal, octal (leading 0) or hex (0x). */
function parseIPv4Number(part: string): number | null {
  if (part === '') return null;
  let digits = part;
  let radix = 10;
  if (digits.length >= 2 && (digits.startsWith('0x') || digits.startsWith('0X'))) {
    digits = digits.slice(2);
    radix = 16;
  } else if (digits.length >= 2 && digits.startsWith('0')) {
    digits = digits.slice(1);
    radix = 8;
  }
  if (digits === '') return 0;
  const valid = radix === 16 ? /^[0-9a-f]+$/i : radix === 8 ? /^[0-7]+$/ : /^[0-9]+$/;
  if (!valid.test(digits)) return null;
  // Precision loss for huge values is harmless: they are rejected as out of range.
  return parseInt(digits, radix);
}

/** WHATWG IPv4 parser (inet_aton compatible): 1 to 4 parts, last part fills the remaining bytes. */
function parseIPv4(host: string): number | null {
  const parts = host.split('.');
  if (parts[parts.length - 1] === '' && parts.length > 1) parts.pop();
  if (parts.length > 4) return null;
  const numbers: number[] = [];
  for (const part of parts) {
    const n = parseIPv4Number(part);
    if (n === null) return null;
    numbers.push(n);
  }
  const last = numbers.pop() ?? 0;
  if (numbers.some((n) => n > 255)) return null;
  if (last >= 256 ** (4 - numbers.length)) return null;
  let value = last;
  numbers.forEach((n, i) => {
    value += n * 256 ** (3 - i);
  });
  return value;
}

const HEX = /^[0-9a-f]$/i;
const DIGIT = /^[0-9]$/;

/** WHATWG IPv6 parser, extended to strip a zone id ('fe80::1%eth0', '%25' URL form). */
function parseIPv6(input: string): number[] | null {
  let s = input;
  const zone = s.indexOf('%');
  if (zone !== -1) {
    const id = s.slice(zone + 1).replace(/^25/, '');
    if (id === '' || !/^[0-9a-z._~-]+$/i.test(id)) return null;
    s = s.slice(0, zone);
  }

  const address = [0, 0, 0, 0, 0, 0, 0, 0];
  let pieceIndex = 0;
  let compress: number | null = null;
  let p = 0;
  const at = (i: number): string => s[i] ?? '';

  if (at(p) === ':') {
    if (at(p + 1) !== ':') return null;
    p += 2;
    pieceIndex += 1;
    compress = pieceIndex;
  }

  while (p < s.length) {
    if (pieceIndex === 8) return null;
    if (at(p) === ':') {
      if (compress !== null) return null;
      p += 1;
      pieceIndex += 1;
      compress = pieceIndex;
      continue;
    }

    let value = 0;
    let length = 0;
    while (length < 4 && HEX.test(at(p))) {
      value = value * 16 + parseInt(at(p), 16);
      p += 1;
      length += 1;
    }

    if (at(p) === '.') {
      // Trailing dotted IPv4 ('::ffff:127.0.0.1'): strict decimal, no leading zeros.
      if (length === 0) return null;
      p -= length;
      if (pieceIndex > 6) return null;
      let numbersSeen = 0;
      while (p < s.length) {
        let ipv4Piece: number | null = null;
        if (numbersSeen > 0) {
          if (at(p) === '.' && numbersSeen < 4) p += 1;
          else return null;
        }
        if (!DIGIT.test(at(p))) return null;
        while (DIGIT.test(at(p))) {
          const n = Number(at(p));
          if (ipv4Piece === null) ipv4Piece = n;
          else if (ipv4Piece === 0) return null;
          else ipv4Piece = ipv4Piece * 10 + n;
          if (ipv4Piece > 255) return null;
          p += 1;
        }
        address[pieceIndex] = (address[pieceIndex] ?? 0) * 0x100 + (ipv4Piece ?? 0);
        numbersSeen += 1;
        if (numbersSeen === 2 || numbersSeen === 4) pieceIndex += 1;
      }
      if (numbersSeen !== 4) return null;
      break;
    } else if (at(p) === ':') {
      p += 1;
      if (p >= s.length) return null;
    } else if (p < s.length) {
      return null;
    }
    address[pieceIndex] = value;
    pieceIndex += 1;
  }

  if (compress !== null) {
    let swaps = pieceIndex - compress;
    pieceIndex = 7;
    while (pieceIndex !== 0 && swaps > 0) {
      const other = compress + swaps - 1;
      const tmp = address[pieceIndex] ?? 0;
      address[pieceIndex] = address[other] ?? 0;
      address[other] = tmp;
      pieceIndex -= 1;
      swaps -= 1;
    }
  } else if (pieceIndex !== 8) {
    return null;
  }
  return address;
}

function formatIPv4(value: number): string {
  return [value >>> 24, (value >>> 16) & 0xff, (value >>> 8) & 0xff, value & 0xff].join('.');
}

/** RFC 5952 / WHATWG serialisation: lowercase, no leading zeros, first longest zero run (>= 2) compressed. */
function formatIPv6(pieces: number[]): string {
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (pieces[i] !== 0) {
      i += 1;
      continue;
    }
    let j = i;
    while (j < 8 && pieces[j] === 0) j += 1;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = (from: number, to: number): string =>
    pieces
      .slice(from, to)
      .map((n) => n.toString(16))
      .join(':');
  if (bestStart === -1) return hex(0, 8);
  return `${hex(0, bestStart)}::${hex(bestStart + bestLength, 8)}`;
}

// ---------------------------------------------------------------------------
// Policy

function v4(text: string): number {
  const value = parseIPv4(text);
  if (value === null) throw new Error(`bad IPv4 constant ${text}`);
  return value;
}

const REFUSED_IPV4: ReadonlyArray<readonly [number, number]> = [
  [v4('0.0.0.0'), 8], // "this network"
  [v4('10.0.0.0'), 8], // private
  [v4('100.64.0.0'), 10], // CGNAT
  [v4('127.0.0.0'), 8], // loopback
  [v4('169.254.0.0'), 16], // link-local, cloud metadata 169.254.169.254
  [v4('172.16.0.0'), 12], // private
  [v4('192.0.0.0'), 24], // IETF protocol assignments
  [v4('192.0.2.0'), 24], // TEST-NET-1
  [v4('192.88.99.0'), 24], // 6to4 relay anycast
  [v4('192.168.0.0'), 16], // private
  [v4('198.18.0.0'), 15], // benchmarking
  [v4('198.51.100.0'), 24], // TEST-NET-2
  [v4('203.0.113.0'), 24], // TEST-NET-3
  [v4('224.0.0.0'), 4], // multicast
  [v4('240.0.0.0'), 4], // reserved, includes broadcast 255.255.255.255
];

function inIPv4Range(value: number, base: number, prefix: number): boolean {
  const shift = 32 - prefix;
  return Math.floor(value / 2 ** shift) === Math.floor(base / 2 ** shift);
}

function isPublicIPv4(value: number): boolean {
  return !REFUSED_IPV4.some(([base, prefix]) => inIPv4Range(value, base, prefix));
}

function embeddedIPv4(high: number, low: number): number {
  return high * 0x10000 + low;
}

function isPublicIPv6(w: number[]): boolean {
  const [w0 = 0, w1 = 0, w2 = 0, w3 = 0, w4 = 0, w5 = 0, w6 = 0, w7 = 0] = w;

  // Addresses that embed an IPv4 address are reachable as that IPv4 address
  // (by the kernel, a NAT64 gateway or a 6to4 relay), so judge the embedded one.
  if (w0 === 0 && w1 === 0 && w2 === 0 && w3 === 0) {
    if (w4 === 0 && (w5 === 0 || w5 === 0xffff)) {
      // ::/96 IPv4-compatible (also covers :: and ::1) and ::ffff:0:0/96 IPv4-mapped.
      return isPublicIPv4(embeddedIPv4(w6, w7));
    }
    if (w4 === 0xffff && w5 === 0) {
      // ::ffff:0:0:0/96 IPv4-translated (SIIT).
      return isPublicIPv4(embeddedIPv4(w6, w7));
    }
    return false;
  }
  if (w0 === 0x64 && w1 === 0xff9b) {
    if (w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0) {
      return isPublicIPv4(embeddedIPv4(w6, w7)); // NAT64 well-known prefix 64:ff9b::/96
    }
    if (w2 === 1) {
      // NAT64 local-use 64:ff9b:1::/48; RFC 6052 /48 layout skips the "u" octet (bits 64-71).
      return isPublicIPv4(w3 * 0x10000 + (w4 & 0xff) * 0x100 + (w5 >>> 8));
    }
    return false;
  }
  if (w0 === 0x2002) return isPublicIPv4(embeddedIPv4(w1, w2)); // 6to4 2002::/16
  if (w0 === 0x2001 && w1 === 0) return false; // Teredo 2001::/32: the embedded server/client cannot be judged

  // Only global unicast 2000::/3 is public. This refuses ::/8 leftovers,
  // 100::/64 discard, fc00::/7 ULA (incl. fd00:ec2::254 metadata), fe80::/10,
  // fec0::/10 and ff00::/8 multicast without listing each.
  if ((w0 & 0xe000) !== 0x2000) return false;
  if (w0 === 0x2001 && w1 <= 0x01ff) return false; // 2001::/23 IETF protocol assignments (benchmarking, ORCHID, ...)
  if (w0 === 0x2001 && w1 === 0x0db8) return false; // documentation 2001:db8::/32
  if (w0 === 0x3fff && w1 <= 0x0fff) return false; // documentation 3fff::/20
  return true;
}
