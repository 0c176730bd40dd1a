import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger, type LogLevel } from '../../adapters/outbound/logger.ts';

function capture(level: LogLevel) {
  const lines: { line: string; level: LogLevel }[] = [];
  const logger = createLogger(level, (line, lvl) => lines.push({ line, level: lvl }));
  const logAll = () => {
    logger.debug('d');
    logger.info('i');
    logger.warn('w');
    logger.error('e');
  };
  return { logger, lines, logAll, msgs: () => lines.map((l) => JSON.parse(l.line).msg as string) };
}

describe('createLogger', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date('2024-05-06T07:08:09.123Z'));
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('writes one JSON line with time, level, msg and the fields', () => {
    const { logger, lines } = capture('info');
    logger.info('request done', { requestId: 'r1', status: 200, nested: { a: [1, 2] } });
    expect(lines).toEqual([
      {
        line: '{"time":"2024-05-06T07:08:09.123Z","level":"info","msg":"request done","requestId":"r1","status":200,"nested":{"a":[1,2]}}',
        level: 'info',
      },
    ]);
  });

  it('fields cannot override time, level or msg', () => {
    const { logger, lines } = capture('info');
    logger.info('real', { level: 'debug', msg: 'spoof', time: 'then', extra: 1 });
    expect(JSON.parse(lines[0]!.line)).toEqual({ time: '2024-05-06T07:08:09.123Z', level: 'info', msg: 'real', extra: 1 });
  });

  it('without fields writes only time, level and msg', () => {
    const { logger, lines } = capture('debug');
    logger.warn('careful');
    expect(lines).toEqual([{ line: '{"time":"2024-05-06T07:08:09.123Z","level":"warn","msg":"careful"}', level: 'warn' }]);
  });

  it('keeps each entry on one line', () => {
    const { logger, lines } = capture('debug');
    logger.error('multi\nline', { stack: 'a\nb\nc' });
    expect(lines).toHaveLength(1);
    expect(lines[0]!.line).not.toContain('\n');
    expect(JSON.parse(lines[0]!.line)).toEqual({ time: '2024-05-06T07:08:09.123Z', level: 'error', msg: 'multi\nline', stack: 'a\nb\nc' });
  });

  it.each([
    ['debug', ['d', 'i', 'w', 'e']],
    ['info', ['i', 'w', 'e']],
    ['warn', ['w', 'e']],
    ['error', ['e']],
    ['silent', []],
  ] as const)('level %s writes %j', (level, expected) => {
    const { lines, logAll, msgs } = capture(level);
    logAll();
    expect(msgs()).toEqual(expected);
    expect(lines.map((l) => l.level)).toEqual(expected.map((m) => ({ d: 'debug', i: 'info', w: 'warn', e: 'error' })[m]));
    for (const { line, level: lvl } of lines) expect(JSON.parse(line).level).toBe(lvl);
  });

  it('silent writes nothing, even with fields', () => {
    const write = vi.fn();
    const logger = createLogger('silent', write);
    logger.error('boom', { a: 1 });
    logger.warn('w');
    logger.info('i');
    logger.debug('d');
    expect(write).not.toHaveBeenCalled();
  });
});
