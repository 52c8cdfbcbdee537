import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuiltCli } from '../helpers/built-cli.js';

/**
 * The commands that write a report directory (`--out`) and print to stdout: with the reader of stdout gone (`| head`,
 * a closed pipe), the CLI ends at its next stdout write (main.ts), so the files are written before it, never lost.
 */

let scratch: string;
beforeAll(() => {
  ensureBuiltCli();
  scratch = mkdtempSync(join(tmpdir(), 'fw-report-stdout-gone-'));
}, 300_000);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Run the built CLI with its stdout a pipe closed at once; its exit code. */
function withStdoutGone(args: readonly string[]): Promise<number | null> {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'ignore'] });
  child.stdout.destroy();
  return new Promise((resolve) => child.once('close', (code) => resolve(code)));
}

const TRACE = ['--format', 'synthetic', '--jobs', '14'];

describe('report files with the reader of stdout gone', () => {
  it.each([
    [
      'simulate',
      ['simulate', ...TRACE, '--scheduler', 'eva', '--no-predict'],
      ['report.html', 'report.json', 'runs.csv'],
    ],
    ['tune', ['tune', ...TRACE, '--samples', '3', '--cap-instances', '3'], ['tune.html', 'tune.json']],
    [
      'bench arms',
      [
        'bench',
        'arms',
        '--seeds',
        '5,6',
        '--common',
        `${TRACE.join(' ')} --scheduler eva --no-predict`,
        '--arm',
        'a=',
        '--arm',
        'b=--queue srpt',
      ],
      ['arms.html', 'arms.json'],
    ],
  ] as const)(
    '%s writes them all and exits 0',
    async (name, args, files) => {
      const out = join(scratch, name.replace(' ', '-'));
      expect(await withStdoutGone([...args, '--out', out])).toBe(0);
      expect(readdirSync(out).sort()).toEqual([...files]);
    },
    180_000,
  );
});
