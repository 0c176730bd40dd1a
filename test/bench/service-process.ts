/**
 * The service as `npm start` runs it (the command itself: its environment, then server/start.mjs, the precompiled
 * build), in a process group of its own, for figures that must be the service's alone: its memory without the
 * benchmark's files, parsers and clients beside it. Same set-up as bench-kit's in-process service
 * (prepareBenchData: a fresh temp DATA_DIR or a scratch database on DATABASE_URL's server; unthrottled).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { prepareBenchData, UNTHROTTLED, type BenchData } from './bench-kit.ts';

const PROJECT = new URL('../..', import.meta.url).pathname;
const START_TIMEOUT_MS = 120_000;
const STOP_TIMEOUT_MS = 15_000;

export interface ServiceProcess extends Pick<BenchData, 'onCleanup' | 'cleanup'> {
  url: string;
  /** The service's own process (the one the "listening" line names), not npm's. */
  pid: number;
  databaseKind: 'pglite' | 'postgres';
}

export async function startServiceProcess(log: (m: string) => void, env: Record<string, string> = {}): Promise<ServiceProcess> {
  const { dataDir, databaseUrl, onCleanup, cleanup } = await prepareBenchData(log);
  try {
    log(`starting the service process (npm start's build; ${databaseUrl ? 'PostgreSQL' : 'embedded PGlite'}) in ${dataDir}`);
    const child = spawn('npm', ['start', '--silent'], {
      cwd: PROJECT,
      detached: true,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: dataDir,
        DATABASE_URL: databaseUrl ?? '',
        REDIS_URL: '',
        ENCRYPTION_KEY: randomBytes(32).toString('base64'),
        LOG_LEVEL: 'info',
        ...UNTHROTTLED,
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
    onCleanup('stop watching for exits', () => {
      process.off('exit', killGroup);
      process.off('SIGINT', interrupted);
      process.off('SIGTERM', interrupted);
    });
    onCleanup('stop the service process', async () => {
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
    });
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
      onCleanup,
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
