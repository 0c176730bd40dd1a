import type { KbDocumentRow, NewUpload } from './repository.ts';

/** Statements of one configuration's uploads running at once; the uploads that come meanwhile wait and go together. */
const IN_FLIGHT = 2;
/** At most this many uploads in one statement. */
const MAX_GROUP = 32;

interface Waiting {
  upload: NewUpload;
  resolve(row: KbDocumentRow | undefined): void;
  reject(error: unknown): void;
}

interface Lane {
  waiting: Waiting[];
  running: number;
}

export interface UploadInserts {
  /** The upload's document row, or undefined when its knowledge base already holds the content (as insertDocumentsWithJobs). */
  insert(upload: NewUpload): Promise<KbDocumentRow | undefined>;
}

/**
 * Uploads' inserts in groups (group commit; `write` is repository.ts's insertDocumentsWithJobs): an upload arriving
 * while IN_FLIGHT statements for its configuration are running waits for one of them and then goes in one statement
 * with the others that waited, instead of one statement each. On the embedded database a statement of 8 uploads
 * cost about 0.3 ms of its engine per upload against 0.6 ms alone (each statement is a commit and a pass through
 * the executor), and on PostgreSQL it is one commit's flush for them all. An upload alone waits for nothing.
 *
 * Grouped per configuration, never across: a statement held up (the configuration's row locked by its deletion)
 * holds up only uploads to that configuration, as it would have without grouping, never another owner's.
 *
 * A group's statement fails whole (a configuration deleted during one upload breaks its foreign key): its uploads
 * are then inserted one at a time, so every upload gets its own answer and only the one at fault its error.
 */
export function createUploadInserts(write: (uploads: NewUpload[]) => Promise<KbDocumentRow[]>): UploadInserts {
  const lanes = new Map<string, Lane>();
  // A writer that throws instead of rejecting must still settle every waiting upload.
  const writeSafely = (uploads: NewUpload[]): Promise<KbDocumentRow[]> => {
    try {
      return write(uploads);
    } catch (error) {
      return Promise.reject(error);
    }
  };

  const pump = (configId: string, lane: Lane) => {
    while (lane.running < IN_FLIGHT && lane.waiting.length > 0) {
      lane.running++;
      void insertGroup(lane.waiting.splice(0, MAX_GROUP)).finally(() => {
        lane.running--;
        if (lane.running === 0 && lane.waiting.length === 0) lanes.delete(configId);
        else pump(configId, lane);
      });
    }
  };

  async function insertGroup(group: Waiting[]) {
    try {
      // Rows are matched by id: ours, from randomUUID(), which PostgreSQL gives back exactly as sent.
      const rows = new Map((await writeSafely(group.map((w) => w.upload))).map((row) => [row.id, row]));
      for (const w of group) w.resolve(rows.get(w.upload.document.id));
    } catch (error) {
      if (group.length === 1) {
        group[0]!.reject(error);
        return;
      }
      for (const w of group) {
        await writeSafely([w.upload]).then(
          (rows) => w.resolve(rows[0]),
          (own: unknown) => w.reject(own),
        );
      }
    }
  }

  return {
    insert: (upload) =>
      new Promise<KbDocumentRow | undefined>((resolve, reject) => {
        const configId = upload.document.config_id;
        let lane = lanes.get(configId);
        if (!lane) {
          lane = { waiting: [], running: 0 };
          lanes.set(configId, lane);
        }
        lane.waiting.push({ upload, resolve, reject });
        pump(configId, lane);
      }),
  };
}
