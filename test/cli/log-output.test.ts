import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOG_FORMAT_ENV, LOG_LEVEL_ENV, logLevelFrom, selectLogFormat } from '../../src/cli/log-output.js';
import { ValidationError } from '../../src/core/validation.js';
import { CLI, ensureBuiltCli } from '../helpers/built-cli.js';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';

describe('the controller log format', () => {
  it('is pretty on a terminal and JSON lines otherwise, unless chosen', () => {
    expect(selectLogFormat(undefined, { isTTY: true }, {})).toBe('pretty');
    expect(selectLogFormat(undefined, { isTTY: false }, {})).toBe('json');
    expect(selectLogFormat(undefined, {}, {})).toBe('json');
    expect(selectLogFormat('json', { isTTY: true }, {})).toBe('json');
    expect(selectLogFormat('pretty', {}, {})).toBe('pretty');
    expect(selectLogFormat(undefined, { isTTY: true }, { [LOG_FORMAT_ENV]: 'json' })).toBe('json');
    expect(selectLogFormat('auto', { isTTY: true }, { [LOG_FORMAT_ENV]: 'json' })).toBe('pretty');
    expect(() => selectLogFormat('yaml', {}, {})).toThrow(ValidationError);
    expect(() => selectLogFormat(undefined, {}, { [LOG_FORMAT_ENV]: 'text' })).toThrow(LOG_FORMAT_ENV);
  });
});

describe('the log level', () => {
  it('is info unless FLEETWISE_LOG_LEVEL names a pino level, and a wrong name is refused by name', () => {
    expect(logLevelFrom({})).toBe('info');
    expect(logLevelFrom({ [LOG_LEVEL_ENV]: '' })).toBe('info');
    expect(logLevelFrom({ [LOG_LEVEL_ENV]: 'debug' })).toBe('debug');
    expect(logLevelFrom({ [LOG_LEVEL_ENV]: 'warn' })).toBe('warn');
    expect(() => logLevelFrom({ [LOG_LEVEL_ENV]: 'loud' })).toThrow(ValidationError);
    expect(() => logLevelFrom({ [LOG_LEVEL_ENV]: 'loud' })).toThrow(/FLEETWISE_LOG_LEVEL.*got loud/s);
  });
});

describe('fleetwise controller logging (CLI subprocess)', () => {
  let dir = '';
  beforeAll(() => {
    ensureBuiltCli();
    dir = mkdtempSync(join(tmpdir(), 'fleetwise-log-'));
  }, 240_000);
  afterAll(() => {
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  /** Start a local controller with stderr piped, wait for its recovery line, stop it; its stderr. */
  function controllerStderr(
    name: string,
    extra: readonly string[],
    extraEnv: NodeJS.ProcessEnv = {},
  ): Promise<string> {
    return new Promise((resolve, reject) => {
      const env = { ...process.env, ...extraEnv };
      delete env[LOG_FORMAT_ENV];
      const child = spawn(
        process.execPath,
        [
          CLI,
          'controller',
          '--provider',
          'local',
          '--executor',
          'process',
          '--state-dir',
          join(dir, name),
          '--listen',
          '127.0.0.1:0',
          ...extra,
        ],
        { env, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let err = '';
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`no "recovered state" line within 60 s:\n${err}`));
      }, 60_000);
      child.stdout.resume();
      child.stderr.on('data', (d: Buffer) => {
        err += d.toString();
        if (err.includes('recovered state')) child.kill('SIGTERM');
      });
      child.once('exit', () => {
        clearTimeout(timer);
        resolve(err);
      });
    });
  }

  it('writes JSON lines with epoch-millisecond times when stderr is a pipe', async () => {
    const stderr = await controllerStderr('json', []);
    const lines = stderr.trimEnd().split('\n');
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const line of lines) {
      const entry = JSON.parse(line) as { level: number; time: number; msg: string };
      expect(entry.time).toBeGreaterThan(1.6e12);
      expect(typeof entry.msg).toBe('string');
    }
    expect(lines.some((l) => l.includes('"msg":"recovered state"'))).toBe(true);
  }, 90_000);

  it('writes readable lines with --log-format pretty', async () => {
    const stderr = await controllerStderr('pretty', ['--log-format', 'pretty']);
    const plain = stderr.replace(/\x1b\[[0-9;]*m/g, '');
    expect(plain).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: scheduler: eva$/m);
    expect(plain).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: recovered state \{.*"pendingIntents":0/m);
    expect(plain).not.toContain('"level"');
  }, 90_000);

  it('keeps every line a process wrote before it was SIGKILLed (the lines its operator needs)', async () => {
    const file = join(dir, 'killed.log');
    const fd = openSync(file, 'w');
    const module = join(PROJECT_ROOT, 'dist', 'cli', 'log-output.js');
    // The built module in a process of its own, as the controller and the workers use it: a burst, then SIGKILL.
    const script = `
      import { commandLogger, logDestination } from ${JSON.stringify(module)};
      const log = commandLogger({ component: 'test' }, logDestination('json', 2));
      for (let i = 0; i < 2000; i++) log.info('line ' + i);
      process.kill(process.pid, 'SIGKILL');`;
    const signal = await new Promise<NodeJS.Signals | null>((resolve) => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
        env: { ...process.env, [LOG_LEVEL_ENV]: 'info' },
        stdio: ['ignore', 'ignore', fd],
      });
      child.once('exit', (_code, sig) => resolve(sig));
    });
    closeSync(fd);
    expect(signal).toBe('SIGKILL');
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(2000);
    expect(JSON.parse(lines.at(-1) ?? '{}')).toMatchObject({ msg: 'line 1999', component: 'test' });
  }, 90_000);

  it('refuses an unknown FLEETWISE_LOG_LEVEL by name before it starts', async () => {
    const refused = await controllerStderr('bad-level', [], { [LOG_LEVEL_ENV]: 'loud' });
    expect(refused).toMatch(
      /FLEETWISE_LOG_LEVEL.*expected trace \| debug \| info \| warn \| error \| fatal, got loud/s,
    );
  }, 90_000);
});
