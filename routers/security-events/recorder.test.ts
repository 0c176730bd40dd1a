import { describe, expect, it } from 'vitest';
import { createLogger } from '../../adapters/outbound/logger.ts';
import { SECURITY_EVENT_KINDS } from '../../schema/security-events.ts';
import { createSecurityEventRecorder, type SecurityEventStore } from './recorder.ts';
import type { SecurityEventCount } from './repository.ts';

/** A store whose writes finish only when the test says so, as a database that has slowed down. */
function slowStore() {
  const writes: Array<{ counts: SecurityEventCount[]; finish: () => void }> = [];
  const store: SecurityEventStore = {
    write: (_events, counts) => new Promise<void>((resolve) => writes.push({ counts, finish: resolve })),
    prune: async () => ({ events: 0, counts: 0 }),
  };
  return { store, writes };
}

const total = (counts: SecurityEventCount[]) => counts.reduce((sum, c) => sum + c.count, 0);
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('security event recorder', () => {
  it('a slow database has one write in flight; events meanwhile merge into the next batch, none lost', async () => {
    const { store, writes } = slowStore();
    const recorder = createSecurityEventRecorder({ store, logger: createLogger('error', () => {}), retentionDays: 30 });
    const kind = SECURITY_EVENT_KINDS[0];
    recorder.record(kind);
    const first = recorder.flush();
    await tick();
    expect(writes).toHaveLength(1);
    // Flushes while the first write hangs (the timer's, every second) take no new batch.
    const waiting: Promise<void>[] = [];
    for (let second = 0; second < 5; second++) {
      for (let i = 0; i < 3; i++) recorder.record(kind);
      waiting.push(recorder.flush());
      await tick();
    }
    expect(writes).toHaveLength(1);
    writes[0]!.finish();
    await first;
    await tick();
    // The fifteen events of those seconds go in one write, once the first has ended.
    expect(writes).toHaveLength(2);
    expect(total(writes[1]!.counts)).toBe(15);
    writes[1]!.finish();
    await Promise.all(waiting);
    expect(writes).toHaveLength(2);
    expect(writes.map((w) => total(w.counts))).toEqual([1, 15]);
  });

  it('flush resolves once what was buffered when it was called is written', async () => {
    const { store, writes } = slowStore();
    const recorder = createSecurityEventRecorder({ store, logger: createLogger('error', () => {}), retentionDays: 30 });
    const kind = SECURITY_EVENT_KINDS[0];
    recorder.record(kind);
    void recorder.flush();
    await tick();
    recorder.record(kind);
    let done = false;
    const second = recorder.flush().then(() => {
      done = true;
    });
    writes[0]!.finish();
    await tick();
    await tick();
    expect(done).toBe(false);
    expect(writes).toHaveLength(2);
    writes[1]!.finish();
    await second;
    expect(done).toBe(true);
  });
});
