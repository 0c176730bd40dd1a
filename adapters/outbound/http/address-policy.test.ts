import { describe, expect, it } from 'vitest';
import { isPublicAddress, parseIpLiteral } from './address-policy.ts';

describe('parseIpLiteral + isPublicAddress', () => {
  // [spelling, canonical form, allowed]
  const table: Array<[string, string, boolean]> = [
    ['127.0.0.1', '127.0.0.1', false],
    ['127.1', '127.0.0.1', false],
    ['2130706433', '127.0.0.1', false],
    ['0x7f000001', '127.0.0.1', false],
    ['0X7F000001', '127.0.0.1', false],
    ['0177.0.0.1', '127.0.0.1', false],
    ['017700000001', '127.0.0.1', false],
    ['0x7f.0x0.0x0.0x1', '127.0.0.1', false],
    ['0x7f.1', '127.0.0.1', false],
    ['127.0.0.1.', '127.0.0.1', false],
    ['%31%32%37.0.0.1', '127.0.0.1', false],
    ['\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11', '127.0.0.1', false],
    ['10.1', '10.0.0.1', false],
    ['0', '0.0.0.0', false],
    ['0.0.0.0', '0.0.0.0', false],
    ['[::1]', '::1', false],
    ['::1', '::1', false],
    ['::', '::', false],
    ['0:0:0:0:0:0:0:1', '::1', false],
    ['::ffff:127.0.0.1', '::ffff:7f00:1', false],
    ['[::ffff:127.0.0.1]', '::ffff:7f00:1', false],
    ['::ffff:7f00:1', '::ffff:7f00:1', false],
    ['::ffff:0:7f00:1', '::ffff:0:7f00:1', false],
    ['::127.0.0.1', '::7f00:1', false],
    ['::a9fe:a9fe', '::a9fe:a9fe', false],
    ['64:ff9b::7f00:1', '64:ff9b::7f00:1', false],
    ['64:ff9b::169.254.169.254', '64:ff9b::a9fe:a9fe', false],
    ['64:ff9b:1:7f00:0:100::', '64:ff9b:1:7f00:0:100::', false],
    ['2002:7f00:1::', '2002:7f00:1::', false],
    ['2002:a9fe:a9fe::1', '2002:a9fe:a9fe::1', false],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', '2001:0:4136:e378:8000:63bf:3fff:fdd2', false],
    ['169.254.169.254', '169.254.169.254', false],
    ['100.64.0.1', '100.64.0.1', false],
    ['100.127.255.255', '100.127.255.255', false],
    ['10.0.0.1', '10.0.0.1', false],
    ['192.168.1.1', '192.168.1.1', false],
    ['172.16.0.1', '172.16.0.1', false],
    ['172.31.255.255', '172.31.255.255', false],
    ['192.0.0.8', '192.0.0.8', false],
    ['192.0.2.1', '192.0.2.1', false],
    ['192.88.99.1', '192.88.99.1', false],
    ['198.18.0.1', '198.18.0.1', false],
    ['198.19.255.255', '198.19.255.255', false],
    ['198.51.100.1', '198.51.100.1', false],
    ['203.0.113.1', '203.0.113.1', false],
    ['224.0.0.1', '224.0.0.1', false],
    ['239.255.255.255', '239.255.255.255', false],
    ['240.0.0.1', '240.0.0.1', false],
    ['255.255.255.255', '255.255.255.255', false],
    ['fd00:ec2::254', 'fd00:ec2::254', false],
    ['FC00::1', 'fc00::1', false],
    ['fe80::1', 'fe80::1', false],
    ['fe80::1%eth0', 'fe80::1', false],
    ['[fe80::1%25eth0]', 'fe80::1', false],
    ['fec0::1', 'fec0::1', false],
    ['ff02::1', 'ff02::1', false],
    ['2001:db8::1', '2001:db8::1', false],
    ['100::1', '100::1', false],
    ['8.8.8.8', '8.8.8.8', true],
    ['1.1.1.1', '1.1.1.1', true],
    ['93.184.216.34', '93.184.216.34', true],
    ['172.32.0.1', '172.32.0.1', true],
    ['100.128.0.1', '100.128.0.1', true],
    ['0x08080808', '8.8.8.8', true],
    ['2606:4700:4700::1111', '2606:4700:4700::1111', true],
    ['2606:4700:4700:0:0:0:0:1111', '2606:4700:4700::1111', true],
    ['::ffff:8.8.8.8', '::ffff:808:808', true],
    ['64:ff9b::8.8.8.8', '64:ff9b::808:808', true],
    ['2002:808:808::1', '2002:808:808::1', true],
  ];

  it.each(table)('%s -> %s (public: %s)', (spelling, canonical, allowed) => {
    expect(parseIpLiteral(spelling)).toBe(canonical);
    expect(isPublicAddress(canonical)).toBe(allowed);
    expect(isPublicAddress(spelling)).toBe(allowed);
  });

  it('agrees with WHATWG URL host parsing on every spelling the URL parser accepts', () => {
    for (const [spelling, canonical] of table) {
      if (spelling.includes('%') && spelling.includes(':')) continue; // zone ids are not URL syntax
      const host = spelling.includes(':') && !spelling.startsWith('[') ? `[${spelling}]` : spelling;
      const hostname = new URL(`http://${host}/`).hostname.replace(/^\[|\]$/g, '');
      expect(hostname, spelling).toBe(canonical);
    }
  });

  it.each(['example.com', 'localhost', 'metadata.google.internal', '1.2.3.4.example', '0x7f.example', 'a', ''])(
    'returns null for the hostname %j and treats it as not public',
    (host) => {
      expect(parseIpLiteral(host)).toBeNull();
      expect(isPublicAddress(host)).toBe(false);
    },
  );

  it.each(['1.2.3.256', '1.2.3.4.5', '256.1', '0x100000000', '08.1.1.1', '1..1', '[127.0.0.1]', '::ffff:127.0.0.01', ':::1', '1:2:3:4:5:6:7:8:9'])(
    'rejects the malformed literal %j (null, never public)',
    (host) => {
      expect(parseIpLiteral(host)).toBeNull();
      expect(isPublicAddress(host)).toBe(false);
    },
  );
});
