import { mapPool, uploadDocument, type UploadedDocument } from './bench-kit.ts';
import { forkJobWorker, serveJobs, type JobWorker } from './job-worker.ts';

/**
 * The ingestion benchmarks' uploading client, in a child process of its own (as load.ts is for bench:http): building
 * each multipart body, encrypting it over TLS and parsing each reply must not run on the measured service's event
 * loop, where no real client's work runs. The parent forks it and hands it the files before its clock starts
 * (`load`), then starts the uploads; each comes back as the service answered it, in the order given.
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
  concurrency: number;
  /** Date.now() by which the uploads must be done: past it the child is killed and the run fails. */
  deadline: number;
}

type ClientJob = { load: UploadFile[] } | UploadJob;

export interface UploadClient {
  /** Hands the child the files to upload; resolves once it holds them (call it before timing anything). */
  load(files: UploadFile[]): Promise<void>;
  /** Uploads the loaded files. */
  upload(job: UploadJob): Promise<UploadedDocument[]>;
  close(): Promise<void>;
}

export function forkUploadClient(): UploadClient {
  const worker: JobWorker<ClientJob, UploadedDocument[]> = forkJobWorker(import.meta.url, { BENCH_UPLOAD_CHILD: '1' }, (job) =>
    'load' in job ? 120_000 : Math.max(1_000, job.deadline - Date.now()),
  );
  return {
    load: async (files) => void (await worker.run({ load: files })),
    upload: (job) => worker.run(job),
    close: () => worker.close(),
  };
}

let loaded: UploadFile[] = [];

async function runJob(job: ClientJob): Promise<UploadedDocument[]> {
  if ('load' in job) {
    loaded = job.load;
    return [];
  }
  return mapPool(loaded, job.concurrency, (file) => uploadDocument(job.origin, job.token, job.configId, file.name, file.contentType, file.bytes));
}

if (process.env.BENCH_UPLOAD_CHILD === '1' && typeof process.send === 'function') serveJobs(runJob);
