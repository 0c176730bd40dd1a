import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createSecretBox } from '../../adapters/outbound/secrets.ts';
import { issueVisitorToken, readVisitorToken } from './token.ts';

const box = createSecretBox(randomBytes(32));
const claims = { visitorId: randomUUID(), chatInterfaceId: randomUUID(), expiresAt: Date.now() + 60_000 };

describe('visitor tokens', () => {
  it('round-trip their claims (expiry to the second) until they expire', () => {
    const token = issueVisitorToken(box, claims);
    expect(token).toMatch(/^vis_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(readVisitorToken(box, token, Date.now())).toEqual({ ...claims, expiresAt: Math.floor(claims.expiresAt / 1000) * 1000 });
    expect(readVisitorToken(box, token, claims.expiresAt + 1_000)).toBeNull();
  });

  it('refuse another key, an altered payload or tag, and anything that is not a token', () => {
    const token = issueVisitorToken(box, claims);
    expect(readVisitorToken(createSecretBox(randomBytes(32)), token, Date.now())).toBeNull();
    const [payload, tag] = token.slice(4).split('.') as [string, string];
    const otherPayload = Buffer.from(`${randomUUID()}.${claims.chatInterfaceId}.${Math.floor(claims.expiresAt / 1000)}`).toString('base64url');
    expect(readVisitorToken(box, `vis_${otherPayload}.${tag}`, Date.now())).toBeNull();
    expect(readVisitorToken(box, `vis_${payload}.${tag.slice(0, -2)}`, Date.now())).toBeNull();
    expect(readVisitorToken(box, `vis_${payload}.${tag}.x`, Date.now())).toBeNull();
    for (const junk of ['vis_', 'vis_.', 'vis_abc', `vis_${'a'.repeat(400)}.b`, 'vis_%%%.***']) expect(readVisitorToken(box, junk, Date.now())).toBeNull();
  });

  it('refuse a genuine signature over claims that are not a visitor and an interface id', () => {
    const payload = Buffer.from(`not-a-uuid.${claims.chatInterfaceId}.${Math.floor(claims.expiresAt / 1000)}`).toString('base64url');
    expect(readVisitorToken(box, `vis_${payload}.${box.sign('visitor-token-v1', payload)}`, Date.now())).toBeNull();
    // A tag made for another purpose never verifies as a visitor token.
    const valid = issueVisitorToken(box, claims).slice(4).split('.')[0] as string;
    expect(readVisitorToken(box, `vis_${valid}.${box.sign('another-purpose', valid)}`, Date.now())).toBeNull();
  });
});
