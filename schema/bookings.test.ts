import { describe, expect, it } from 'vitest';
import { attendeeInput, availabilityInput, availableSlotsInput, canonicalTimeZone, timeZoneSchema } from './bookings.ts';

/** Up to `count` distinct capitalisations of a name, from a seeded generator (the same ones every run). */
function capitalisations(name: string, count: number): string[] {
  let seed = 42;
  const random = () => {
    seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
    return seed >>> 16;
  };
  const letters = [...name].filter((c) => c.toLowerCase() !== c.toUpperCase()).length;
  const out = new Set<string>();
  while (out.size < Math.min(count, 2 ** letters)) out.add([...name].map((c) => (random() & 1 ? c.toUpperCase() : c.toLowerCase())).join(''));
  return [...out];
}

describe('timeZoneSchema', () => {
  it('answers the canonical spelling, not the caller’s capitalisation', () => {
    expect(timeZoneSchema.parse('eUROPE/bERLIN')).toBe('Europe/Berlin');
    expect(timeZoneSchema.parse('europe/berlin')).toBe('Europe/Berlin');
    expect(timeZoneSchema.parse('AMERICA/PORT-AU-PRINCE')).toBe('America/Port-au-Prince');
    expect(timeZoneSchema.parse('utc')).toBe('UTC');
    // Current IANA names come back as such, also where Node 20's ICU knows the zone by an older alias (Asia/Calcutta).
    expect(timeZoneSchema.parse('aSIA/kOLKATA')).toBe('Asia/Kolkata');
    expect(timeZoneSchema.parse('europe/kyiv')).toBe('Europe/Kyiv');
    expect(timeZoneSchema.parse('AMERICA/ARGENTINA/BUENOS_AIRES')).toBe('America/Argentina/Buenos_Aires');
  });

  it('leaves a canonical name as it is', () => {
    for (const zone of ['Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Kolkata', 'America/Port-au-Prince', 'UTC', 'Etc/GMT+5']) {
      expect(timeZoneSchema.parse(zone)).toBe(zone);
    }
  });

  it('gives every capitalisation of a name the same answer, one that is its own canonical form', () => {
    for (const name of ['America/Argentina/ComodRivadavia', 'Europe/Berlin', 'Asia/Kolkata', 'US/Eastern', 'Etc/GMT-14']) {
      const variants = capitalisations(name, 300);
      expect(variants.length).toBeGreaterThanOrEqual(32);
      const answers = new Set(variants.map((v) => timeZoneSchema.parse(v)));
      expect(answers.size, name).toBe(1);
      const [answer] = [...answers] as [string];
      expect(canonicalTimeZone(answer)).toBe(answer);
      // Intl takes it and means the same zone.
      const resolve = (zone: string) => new Intl.DateTimeFormat('en', { timeZone: zone }).resolvedOptions().timeZone;
      expect(resolve(answer)).toBe(resolve(name));
    }
    // An obsolete alias becomes the zone ICU files it under (America/Catamarca on Node 20).
    expect(['America/Catamarca', 'America/Argentina/Catamarca', 'America/Argentina/ComodRivadavia']).toContain(
      timeZoneSchema.parse('aMeRICA/Argentina/comodrivadavia'),
    );
  });

  it('refuses what is no IANA zone Intl knows (offsets included, whatever the Node version), with the field’s message', () => {
    for (const zone of ['Nowhere', 'Mars/Olympus_Mons', 'Europe/Berlinn', ' Europe/Berlin', 'Europe/\u212Aiev', '+01:00', '-0530', '\u221201:00', '']) {
      const result = timeZoneSchema.safeParse(zone);
      expect(result.success, zone).toBe(false);
    }
    expect(timeZoneSchema.safeParse('Nowhere').error?.issues[0]?.message).toBe('must be an IANA time zone such as Europe/Berlin');
    expect(timeZoneSchema.safeParse('x'.repeat(65)).success).toBe(false);
    expect(canonicalTimeZone('Nowhere')).toBeNull();
  });

  it('is the canonical form in every input that takes a zone', () => {
    const weekly = { mon: [], tue: [], wed: [], thu: [], fri: [], sat: [], sun: [] };
    expect(availabilityInput.parse({ timeZone: 'america/new_york', weekly }).timeZone).toBe('America/New_York');
    expect(attendeeInput.parse({ name: 'Ada', email: 'ada@example.com', timeZone: 'eUROPE/bERLIN' }).timeZone).toBe('Europe/Berlin');
    expect(attendeeInput.parse({ name: 'Ada', email: 'ada@example.com' }).timeZone).toBeUndefined();
    expect(availableSlotsInput.parse({ chatInterfaceId: 'x', timeZone: 'ASIA/TOKYO' }).timeZone).toBe('Asia/Tokyo');
    const refused = availabilityInput.safeParse({ timeZone: 'Nowhere', weekly });
    expect(refused.error?.issues.map((i) => i.path.join('.'))).toEqual(['timeZone']);
  });
});
