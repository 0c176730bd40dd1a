import type { KbDocumentRow, NewUpload } from './repository.ts';

/** Statements of uploads running at once per instance; the uploads that come meanwhile wait and go together. */
const IN_FLIGHT = 2;
/** At most this many uploads in one statement. */
const MAX_GROUP = 32;

interface Waiting {
  upload: NewUpload;
  resolve(row: KbDocumentRow | undefined): void;
  reject(error: unknown): void;
}

export interface UploadInserts {
  /** The upload's document row, or undefined when its knowledge base already holds the content (as insertDocumentsWithJobs). */
  insert(upload: NewUpload): Promise<KbDocumentRow | undefined>;
}

/**
 * Uploads' inserts in groups (group commit; `write` is repository.ts's insertDocumentsWithJobs): an upload arriving while IN_FLIGHT statements are running waits for
 * one of them and then goes in one statement with the others that waited, instead of one statement each. On the
 * embedded database a statement of 8 uploads cost about 0.3 ms of its engine per upload against 0.6 ms alone
 * (each statement is a commit and a pass through the executor), and on PostgreSQL it is one commit's flush for
 * them all. An upload alone waits for nothing: the first IN_FLIGHT go at once.
 *
 * A group's statement fails whole (a configuration deleted during one upload breaks its foreign key): each of its
 * uploads is then inserted alone, so every upload gets its own answer and only the one at fault its error.
 */
export function createUploadInserts(write: (uploads: NewUpload[]) => Promise<KbDocumentRow[]>): UploadInserts {
  const waiting: Waiting[] = [];
  let running = 0;

  const pump = () => {
    while (running < IN_FLIGHT && waiting.length > 0) {
      running++;
      void insertGroup(waiting.splice(0, MAX_GROUP)).finally(() => {
        running--;
        pump();
      });
    }
  };

  async function insertGroup(group: Waiting[]) {
    try {
      const rows = new Map((await write(group.map((w) => w.upload))).map((row) => [row.id, row]));
      for (const w of group) w.resolve(rows.get(w.upload.document.id));
    } catch (error) {
      if (group.length === 1) {
        group[0]!.reject(error);
        return;
      }
      await Promise.all(
        group.map((w) =>
          write([w.upload]).then(
            (rows) => w.resolve(rows[0]),
            (own: unknown) => w.reject(own),
          ),
        ),
      );
    }
  }

  return {
    insert: (upload) =>
      new Promise<KbDocumentRow | undefined>((resolve, reject) => {
        waiting.push({ upload, resolve, reject });
        pump();
      }),
  };
}
