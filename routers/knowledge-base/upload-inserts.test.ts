import { describe, expect, it } from 'vitest';
import type { KbDocumentRow, NewUpload } from './repository.ts';
import { createUploadInserts } from './upload-inserts.ts';

/** The grouping alone, over a writer that records its calls (the statement itself: upload-statement.test.ts). */
const upload = (id: string, contentHash = id, configId = 'c'): NewUpload => ({
  document: { id, owner_id: 'o', config_id: configId, file_name: `${id}.txt`, kind: 'txt', size_bytes: 1, content_hash: contentHash, blob_key: null },
  job: { id: `job-${id}`, kind: 'kb.ingest', payload: '{}', dedupeKey: `ingest:${id}`, fairKey: null },
});

function recordingWriter(options: { failWhen?: (ids: string[]) => boolean } = {}) {
  const calls: string[][] = [];
  const releases: Array<() => void> = [];
  const write = async (uploads: NewUpload[]): Promise<KbDocumentRow[]> => {
    const ids = uploads.map((u) => u.document.id);
    calls.push(ids);
    // Each statement runs until the test lets it finish, so the test decides what is in flight.
    await new Promise<void>((resolve) => releases.push(resolve));
    if (options.failWhen?.(ids)) throw Object.assign(new Error(`refused ${ids.join(',')}`), { code: '23503' });
    const seen = new Set<string>();
    return uploads.filter((u) => !seen.has(u.document.content_hash) && seen.add(u.document.content_hash)).map((u) => ({ id: u.document.id }) as KbDocumentRow);
  };
  /** Lets the statement at this position (in call order) finish. */
  const release = (index: number) => releases[index]!();
  const releaseAll = async () => {
    while (releases.length > 0) {
      releases.splice(0).forEach((release) => release());
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  return { write, calls, release, releaseAll };
}

describe('createUploadInserts', () => {
  it('sends the first two at once and groups the ones that come while they run into one statement', async () => {
    const writer = recordingWriter();
    const inserts = createUploadInserts(writer.write);
    const answers = ['a', 'b', 'c', 'd', 'e'].map((id) => inserts.insert(upload(id)));
    expect(writer.calls).toEqual([['a'], ['b']]);
    await writer.releaseAll();
    expect(writer.calls).toEqual([['a'], ['b'], ['c', 'd', 'e']]);
    expect((await Promise.all(answers)).map((row) => row?.id)).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('answers undefined for an upload the statement did not write (content already held), the others their rows', async () => {
    const writer = recordingWriter();
    const inserts = createUploadInserts(writer.write);
    const answers = [upload('a'), upload('b'), upload('c', 'same'), upload('d', 'same')].map((u) => inserts.insert(u));
    await writer.releaseAll();
    expect((await Promise.all(answers)).map((row) => row?.id)).toEqual(['a', 'b', 'c', undefined]);
  });

  it('puts at most 32 in one statement', async () => {
    const writer = recordingWriter();
    const inserts = createUploadInserts(writer.write);
    const answers = Array.from({ length: 70 }, (_, i) => inserts.insert(upload(`u${i}`)));
    await writer.releaseAll();
    await Promise.all(answers);
    expect(writer.calls.map((ids) => ids.length)).toEqual([1, 1, 32, 32, 4]);
  });

  it("groups per configuration: a statement held up holds up only its own configuration's uploads", async () => {
    const writer = recordingWriter();
    const inserts = createUploadInserts(writer.write);
    const held = ['a', 'b', 'c'].map((id) => inserts.insert(upload(id)));
    const other = inserts.insert(upload('x', 'x', 'other'));
    expect(writer.calls).toEqual([['a'], ['b'], ['x']]);
    writer.release(2);
    expect((await other)?.id).toBe('x');
    await writer.releaseAll();
    expect((await Promise.all(held)).map((row) => row?.id)).toEqual(['a', 'b', 'c']);
  });

  it('settles every upload when the writer throws at once instead of rejecting', async () => {
    const inserts = createUploadInserts(() => {
      throw new Error('thrown');
    });
    const answers = ['a', 'b', 'c'].map((id) => inserts.insert(upload(id)).catch((error: Error) => error.message));
    expect(await Promise.all(answers)).toEqual(['thrown', 'thrown', 'thrown']);
  });

  it("inserts a failed group's uploads one at a time: only the one at fault gets the error, and the inserts go on", async () => {
    const writer = recordingWriter({ failWhen: (ids) => ids.includes('bad') });
    const inserts = createUploadInserts(writer.write);
    const answers = ['a', 'b', 'c', 'bad', 'd'].map((id) =>
      inserts.insert(upload(id)).then(
        (row) => row?.id,
        (error: Error) => error.message,
      ),
    );
    await writer.releaseAll();
    expect(await Promise.all(answers)).toEqual(['a', 'b', 'c', 'refused bad', 'd']);
    expect(writer.calls).toEqual([['a'], ['b'], ['c', 'bad', 'd'], ['c'], ['bad'], ['d']]);
    const after = inserts.insert(upload('e'));
    await writer.releaseAll();
    expect((await after)?.id).toBe('e');
  });
});
