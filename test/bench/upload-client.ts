import { mapPool, uploadDocument, type UploadedDocument } from './bench-kit.ts';
import { forkJobWorker, serveJobs, type JobWorker } from './job-worker.ts';

/**
 * The ingestion benchmarks' uploading client, in a child process of its own (as load.ts is for bench:http): building
 * each multipart body, encrypting it over TLS and parsing each reply must not run on the measured service's event
 * loop, where no real client's work runs. The parent forks it before its clock starts (`ready`), then sends the
 * files in one job; each comes back as the service answered it, in the order given.
 */
export interface UploadFile {
  name: string;
  contentType: string;
  bytes: Uint8Array;
}

export interface UploadJob {
  origin: string;
  token: string;
  configId: string;
  files: UploadFile[];
  concurrency: number;
  /** The job's hard limit: past it the child is killed and the run fails. */
  timeoutMs: number;
}

type ClientJob = { ready: true } | UploadJob;

export interface UploadClient {
  /** Resolves once the child has started and answers jobs (call it before timing anything). */
  ready(): Promise<void>;
  upload(job: UploadJob): Promise<UploadedDocument[]>;
  close(): Promise<void>;
}

export function forkUploadClient(): UploadClient {
  const worker: JobWorker<ClientJob, UploadedDocument[]> = forkJobWorker(import.meta.url, { BENCH_UPLOAD_CHILD: '1' }, (job) =>
    'ready' in job ? 60_000 : job.timeoutMs,
  );
  return {
    ready: async () => void (await worker.run({ ready: true })),
    upload: (job) => worker.run(job),
    close: () => worker.close(),
  };
}

async function runJob(job: ClientJob): Promise<UploadedDocument[]> {
  if ('ready' in job) return [];
  return mapPool(job.files, job.concurrency, (file) => uploadDocument(job.origin, job.token, job.configId, file.name, file.contentType, file.bytes));
}

if (process.env.BENCH_UPLOAD_CHILD === '1' && typeof process.send === 'function') serveJobs(runJob);
