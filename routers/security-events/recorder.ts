import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';
import type { Logger } from '../../adapters/outbound/logger.ts';
import { isUuid } from '../../schema/common.ts';
import { toStorable } from '../../schema/text-input.ts';
import type { SecurityEventDetail, SecurityEventKind } from '../../schema/security-events.ts';
import { pruneSecurityEvents, writeSecurityEvents, type NewSecurityEvent, type SecurityEventCount } from './repository.ts';

export interface SecurityEventFacts {
  ownerId?: string;
  chatInterfaceId?: string;
  ip?: string;
  /** Short facts, never a secret: an email's domain, a host, a key's first 8 characters. */
  detail?: SecurityEventDetail;
}

/**
 * Security events, recorded where they happen without costing the request anything: `record` only notes the event
 * in memory; a flush every second writes the buffer in one statement. Under a flood the counts stay exact while the
 * rows are sampled (at most `maxRowsPerFlush` per flush, shared fairly between kinds), so an attack cannot turn
 * into a write per request. What is buffered when the process dies (at most a second) is lost.
 */
export interface SecurityEventRecorder {
  /** Never waits and never throws. */
  record(kind: SecurityEventKind, facts?: SecurityEventFacts): void;
  /** Writes what is buffered now (the timer does it every second; tests call it to be deterministic). */
  flush(): Promise<void>;
  /** Deletes events and counts older than the retention. */
  prune(): Promise<{ events: number; counts: number }>;
  readonly retentionDays: number;
  start(): void;
  /** Stops the timer, writes what is left and waits for a running prune. */
  close(): Promise<void>;
}

export interface SecurityEventStore {
  write(events: NewSecurityEvent[], counts: SecurityEventCount[]): Promise<void>;
  prune(before: Date): Promise<{ events: number; counts: number }>;
}

export const databaseSecurityEventStore = (db: Kysely<DB>): SecurityEventStore => ({
  write: (events, counts) => writeSecurityEvents(db, events, counts),
  prune: (before) => pruneSecurityEvents(db, before),
});

const FLUSH_INTERVAL_MS = 1_000;
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const MAX_DETAIL_KEYS = 8;
const MAX_TEXT = 120;
// Defence in depth (callers pass no secrets): a long unbroken token-like run, as every key and token we issue or
// receive is, keeps only its first 8 characters.
const TOKEN_LIKE = /[A-Za-z0-9_+/=-]{24,}/g;

const cleanText = (text: string, max = MAX_TEXT) => toStorable(text.replace(TOKEN_LIKE, (run) => `${run.slice(0, 8)}…`).slice(0, max));

function cleanDetail(detail: SecurityEventDetail | undefined): SecurityEventDetail {
  const clean: SecurityEventDetail = {};
  for (const [key, value] of Object.entries(detail ?? {}).slice(0, MAX_DETAIL_KEYS)) {
    clean[cleanText(key, 40)] = typeof value === 'string' ? cleanText(value) : typeof value === 'number' && !Number.isFinite(value) ? null : value;
  }
  return clean;
}

/** Only ids that can be stored as uuid: one bad value must never fail the whole batch. */
const idOrNull = (id: string | undefined) => (id !== undefined && isUuid(id) ? id.toLowerCase() : null);

interface KindSample {
  seen: number;
  /** A uniform sample of this kind's events since the last flush (reservoir sampling). */
  rows: NewSecurityEvent[];
}

interface Batch {
  seen: number;
  samples: Map<SecurityEventKind, KindSample>;
  counts: Map<string, SecurityEventCount>;
}

const emptyBatch = (): Batch => ({ seen: 0, samples: new Map(), counts: new Map() });

/** Each kind gets an equal share of the cap and what a small kind leaves goes to the others: a flood of one kind
 *  cannot crowd out the rare events beside it. */
function fairShare(samples: Iterable<KindSample>, cap: number): NewSecurityEvent[] {
  const groups = [...samples].sort((a, b) => a.rows.length - b.rows.length);
  const kept: NewSecurityEvent[] = [];
  let room = cap;
  groups.forEach((group, index) => {
    const take = Math.min(group.rows.length, Math.floor(room / (groups.length - index)));
    kept.push(...group.rows.slice(0, take));
    room -= take;
  });
  return kept;
}

export function createSecurityEventRecorder(options: {
  store: SecurityEventStore;
  logger: Logger;
  retentionDays: number;
  maxRowsPerFlush?: number;
  now?: () => number;
}): SecurityEventRecorder {
  const { store, logger, retentionDays } = options;
  const cap = options.maxRowsPerFlush ?? 200;
  const now = options.now ?? Date.now;
  let batch = emptyBatch();
  /** The write under way, if any: at most one. */
  let inFlight: Promise<void> | undefined;
  let pruning: Promise<unknown> = Promise.resolve();
  let timer: ReturnType<typeof setInterval> | undefined;

  const addCount = (count: SecurityEventCount) => {
    const key = `${count.hour}|${count.kind}|${count.owner_id ?? ''}|${count.chat_interface_id ?? ''}`;
    const existing = batch.counts.get(key);
    if (existing) existing.count += count.count;
    else batch.counts.set(key, { ...count });
  };

  async function write(taken: Batch) {
    const rows = fairShare(taken.samples.values(), cap);
    const counts = [...taken.counts.values()];
    try {
      await store.write(rows, counts);
      if (rows.length < taken.seen)
        logger.warn('security events sampled', { events: taken.seen, rowsWritten: rows.length, rowsDropped: taken.seen - rows.length });
    } catch (error) {
      // The counts go back into the buffer for the next flush (they are the exact part); the rows are given up.
      for (const count of counts) addCount(count);
      logger.warn('security events not written', { reason: String(error), rowsLost: rows.length });
    }
  }

  /**
   * Writes what is buffered, one write at a time. While one runs, events keep merging into the next batch: a slow
   * database holds one batch in flight and one filling, never a queue of taken batches growing every second.
   */
  const writeBuffered = (): Promise<void> => {
    if (inFlight) return inFlight;
    // Counts put back by a failed write are pending too, even with no new event.
    if (batch.counts.size === 0) return Promise.resolve();
    const taken = batch;
    batch = emptyBatch();
    const run = write(taken).finally(() => {
      inFlight = undefined;
    });
    inFlight = run;
    return run;
  };

  /** Everything buffered when called is written when it resolves (after the write under way, if any). */
  const flush = async () => {
    await inFlight;
    await writeBuffered();
  };

  return {
    retentionDays,
    record(kind, facts = {}) {
      try {
        const at = now();
        const ownerId = idOrNull(facts.ownerId);
        const chatInterfaceId = idOrNull(facts.chatInterfaceId);
        addCount({ hour: new Date(Math.floor(at / HOUR_MS) * HOUR_MS).toISOString(), kind, owner_id: ownerId, chat_interface_id: chatInterfaceId, count: 1 });
        batch.seen++;
        let sample = batch.samples.get(kind);
        if (!sample) batch.samples.set(kind, (sample = { seen: 0, rows: [] }));
        sample.seen++;
        const slot = sample.rows.length < cap ? sample.rows.length : Math.floor(Math.random() * sample.seen);
        if (slot >= cap) return;
        sample.rows[slot] = {
          id: randomUUID(),
          kind,
          occurred_at: new Date(at).toISOString(),
          owner_id: ownerId,
          chat_interface_id: chatInterfaceId,
          ip: facts.ip === undefined ? null : cleanText(facts.ip, 64),
          detail: cleanDetail(facts.detail),
        };
      } catch (error) {
        logger.warn('security event not recorded', { kind, reason: String(error) });
      }
    },
    flush,
    prune() {
      const run = store.prune(new Date(now() - retentionDays * DAY_MS));
      pruning = run.catch(() => {});
      return run;
    },
    start() {
      timer ??= setInterval(() => void writeBuffered(), FLUSH_INTERVAL_MS);
      timer.unref();
    },
    async close() {
      clearInterval(timer);
      timer = undefined;
      await Promise.all([flush(), pruning]);
    },
  };
}
