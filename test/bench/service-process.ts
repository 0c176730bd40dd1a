/**
 * The service as `npm start` runs it (the command itself: its environment, then server/start.mjs, the precompiled
 * build), in a process group of its own, for
 * figures that must be the service's alone: its memory without the benchmark's files, parsers and clients beside it.
 * Same set-up as bench-kit's in-process service: a fresh temp DATA_DIR (embedded PGlite) or a scratch database on
 * DATABASE_URL's server, rate limits raised so that the benchmark is never throttled.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scratchPostgres } from './bench-kit.ts';

const PROJECT = new URL('../..', import.meta.url).pathname;
const START_TIMEOUT_MS = 120_000;
const STOP_TIMEOUT_MS = 15_000;

export interface ServiceProcess {
  url: string;
  /** The service's own process (the one the "listening" line names), not npm's. */
  pid: number;
  databaseKind: 'pglite' | 'postgres';
  /** Registers a cleanup step; steps run in reverse order of registration. */
  onCleanup(what: string, fn: () => Promise<void> | void): void;
  cleanup(): Promise<void>;
}

export async function startServiceProcess(log: (m: string) => void, env: Record<string, string> = {}): Promise<ServiceProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cis-kbbench-'));
  const cleanups: Array<[string, () => Promise<void> | void]> = [['remove temp DATA_DIR', () => rmSync(dataDir, { recursive: true, force: true })]];
  let cleaned: Promise<void> | undefined;
  const cleanup = () =>
    (cleaned ??= (async () => {
      for (const [what, fn] of cleanups.reverse()) {
        try {
          await fn();
        } catch (error) {
          log(`cleanup (${what}) failed: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
    })());
  try {
    const pg = await scratchPostgres(log);
    if (pg) cleanups.push(['drop scratch database', pg.drop]);
    log(`starting the service process (npm start's build; ${pg ? 'PostgreSQL' : 'embedded PGlite'}) in ${dataDir}`);
    const child = spawn('npm', ['start', '--silent'], {
      cwd: PROJECT,
      detached: true,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: dataDir,
        DATABASE_URL: pg?.url ?? '',
        REDIS_URL: '',
        ENCRYPTION_KEY: randomBytes(32).toString('base64'),
        LOG_LEVEL: 'info',
        RATE_LIMIT_DEFAULT: '100000000',
        RATE_LIMIT_UPLOAD: '100000000',
        RATE_LIMIT_KB_QUERY: '100000000',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    let servicePid: number | undefined;
    // The group is detached from ours: whatever ends this process (an error, the watchdog's exit, Ctrl-C) ends the
    // service too, rather than leaving it running.
    const killGroup = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    const interrupted = (signal: NodeJS.Signals) => {
      killGroup();
      process.exit(signal === 'SIGINT' ? 130 : 143);
    };
    process.once('exit', killGroup);
    process.once('SIGINT', interrupted);
    process.once('SIGTERM', interrupted);
    cleanups.push([
      'stop watching for exits',
      () => {
        process.off('exit', killGroup);
        process.off('SIGINT', interrupted);
        process.off('SIGTERM', interrupted);
      },
    ]);
    cleanups.push([
      'stop the service process',
      async () => {
        // SIGTERM to the service (a graceful stop, as a supervisor sends), then the whole group killed if it lingers;
        // done once the service and npm have both exited, so that the data directory is not removed under it.
        const signal = (pid: number, name: NodeJS.Signals | 0) => {
          try {
            process.kill(pid, name);
            return true;
          } catch {
            return false; // already gone
          }
        };
        if (servicePid !== undefined) signal(servicePid, 'SIGTERM');
        else signal(-child.pid!, 'SIGTERM');
        const deadline = Date.now() + STOP_TIMEOUT_MS;
        while ((servicePid !== undefined && signal(servicePid, 0)) || (child.exitCode === null && child.signalCode === null)) {
          if (Date.now() > deadline) {
            signal(-child.pid!, 'SIGKILL');
            await exited;
            return;
          }
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      },
    ]);
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
    const listening = await new Promise<{ pid: number; url: string; database: 'pglite' | 'postgres' }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the service did not start within ${START_TIMEOUT_MS / 1000} s: ${stderr}`)), START_TIMEOUT_MS);
      let pending = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        pending += chunk;
        for (let end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n')) {
          const line = pending.slice(0, end);
          pending = pending.slice(end + 1);
          if (!line.includes('"listening"')) continue;
          clearTimeout(timer);
          const parsed = JSON.parse(line);
          servicePid = parsed.pid;
          resolve(parsed);
        }
        // Later lines are read and dropped, so that the child never blocks on a full pipe.
        if (pending.length > 65_536) pending = '';
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`the service exited during start-up (${signal ?? code}): ${stderr}`));
      });
    });
    return {
      url: listening.url,
      pid: listening.pid,
      databaseKind: listening.database,
      onCleanup: (what, fn) => void cleanups.push([what, fn]),
      cleanup,
    };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

/** Resident set size and its lifetime peak (VmHWM) of another process, from /proc (Linux). */
export function processMemory(pid: number): { rssBytes: number; peakBytes: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rssBytes: kib('VmRSS'), peakBytes: kib('VmHWM') };
}

/** Samples another process's RSS every `intervalMs` (unref'd timer) until stopped; as bench-kit's startRssSampler. */
export function startProcessRssSampler(pid: number, intervalMs = 50) {
  const startRss = processMemory(pid).rssBytes;
  let peak = startRss;
  let samples = 1;
  const timer = setInterval(() => {
    let rssBytes: number;
    try {
      ({ rssBytes } = processMemory(pid));
    } catch {
      return; // the process has gone: the run fails on its own, through its requests
    }
    samples++;
    if (rssBytes > peak) peak = rssBytes;
  }, intervalMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      const { rssBytes } = processMemory(pid);
      if (rssBytes > peak) peak = rssBytes;
      return { startBytes: startRss, peakBytes: peak, samples: samples + 1 };
    },
  };
}
