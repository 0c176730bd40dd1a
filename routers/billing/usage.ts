import type { Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';
import { documentTotals } from '../knowledge-base/repository.ts';
import { monthStart, usageOf } from './repository.ts';

/** This calendar month's (UTC) metered usage and what is stored now: the subscription's and the dashboard's usage. */
export async function monthUsage(db: Kysely<DB>, ownerId: string, now: Date) {
  const start = monthStart(now);
  const end = new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1));
  const [counts, stored] = await Promise.all([usageOf(db, ownerId, start), documentTotals(db, ownerId)]);
  return { periodStart: start.toISOString(), periodEnd: end.toISOString(), ...counts, ...stored };
}
