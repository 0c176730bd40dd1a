/** Structured JSON-lines logging to stdout/stderr. Small on purpose: one object per line, no formatting work at info-off levels. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export function createLogger(level: LogLevel, write: (line: string, level: LogLevel) => void = defaultWrite): Logger {
  const threshold = RANK[level];
  const log = (lvl: Exclude<LogLevel, 'silent'>) => (msg: string, fields?: Record<string, unknown>) => {
    if (RANK[lvl] < threshold) return;
    const entry: Record<string, unknown> = { time: new Date().toISOString(), level: lvl, msg };
    // A field never overrides the core keys, so log lines cannot be spoofed through user-supplied fields.
    for (const [key, value] of Object.entries(fields ?? {})) if (!(key in entry)) entry[key] = value;
    write(JSON.stringify(entry), lvl);
  };
  return { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
}

function defaultWrite(line: string, level: LogLevel) {
  (level === 'error' || level === 'warn' ? process.stderr : process.stdout).write(line + '\n');
}
