import { forkJobWorker, serveJobs } from './job-worker.ts';
import { startProviderMock, type ProviderMock, type ProviderMockRequest } from '../helpers/provider-mock-servers.ts';

/**
 * The provider mock (test/helpers/provider-mock-servers.ts) in its own process, as a real upstream is: in the
 * service's process its request handling would run on the service's event loop and count as time we add.
 */
export interface ProviderMockProcess {
  url: string;
  port: number;
  reset(): Promise<void>;
  requests(): Promise<ProviderMockRequest[]>;
  close(): Promise<void>;
}

type Job = { op: 'start' } | { op: 'reset' } | { op: 'requests' };
type Result = { url: string; port: number } | { ok: true } | ProviderMockRequest[];

const CHILD_ENV = 'BENCH_PROVIDER_MOCK_CHILD';
const JOB_BOUND_MS = 30_000;

export async function startProviderMockProcess(): Promise<ProviderMockProcess> {
  const worker = forkJobWorker<Job, Result>(import.meta.url, { [CHILD_ENV]: '1' }, () => JOB_BOUND_MS);
  const { url, port } = (await worker.run({ op: 'start' })) as { url: string; port: number };
  return {
    url,
    port,
    reset: async () => void (await worker.run({ op: 'reset' })),
    requests: async () => (await worker.run({ op: 'requests' })) as ProviderMockRequest[],
    close: () => worker.close(),
  };
}

if (process.env[CHILD_ENV] === '1' && typeof process.send === 'function') {
  let mock: ProviderMock | undefined;
  serveJobs<Job, Result>(async (job) => {
    if (job.op === 'start') {
      mock ??= await startProviderMock();
      return { url: mock.url, port: mock.port };
    }
    if (!mock) throw new Error('the mock is not started');
    if (job.op === 'reset') {
      mock.reset();
      return { ok: true };
    }
    return mock.requests;
  });
  process.on('disconnect', () => void mock?.close());
}
