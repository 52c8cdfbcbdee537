import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkOutputDirectory, checkOutputFile } from '../../src/cli/output-target.js';
import { ValidationError } from '../../src/core/validation.js';

/** Where a command will write, refused before its work when it cannot be written there. */

const tmp = mkdtempSync(join(tmpdir(), 'fleetwise-output-target-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const file = join(tmp, 'a-file.json');
writeFileSync(file, '{}');
mkdirSync(join(tmp, 'dir'));

function problem(check: () => void): string {
  try {
    check();
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return (e as Error).message;
  }
  return 'accepted';
}

describe('output targets', () => {
  it('a file: not a directory, in a directory that exists', () => {
    expect(problem(() => checkOutputFile(file, '--out'))).toBe('accepted'); // overwritten, as before
    expect(problem(() => checkOutputFile(join(tmp, 'new.json'), '--out'))).toBe('accepted');
    expect(problem(() => checkOutputFile(join(tmp, 'dir'), '--out'))).toMatch(
      /^--out: .*dir is a directory, not a file/,
    );
    expect(problem(() => checkOutputFile(join(tmp, 'missing', 'x.json'), '--table'))).toMatch(
      /^--table: .*missing is not a directory to write .*x\.json in/,
    );
    expect(problem(() => checkOutputFile(join(file, 'x.json'), '--out'))).toMatch(/is not a directory/);
  });

  it('a directory: one that exists or can be made, under no file', () => {
    expect(problem(() => checkOutputDirectory(join(tmp, 'dir'), '--out'))).toBe('accepted');
    expect(problem(() => checkOutputDirectory(join(tmp, 'new', 'deeper'), '--out'))).toBe('accepted');
    expect(problem(() => checkOutputDirectory(file, '--out'))).toMatch(
      /^--out: .*a-file\.json is a file, not a directory/,
    );
    expect(problem(() => checkOutputDirectory(join(file, 'below'), '--out'))).toMatch(
      /^--out: .*a-file\.json is a file: cannot make .*below/,
    );
  });
});

describe('output directories that cannot hold a report', () => {
  it('under a kernel filesystem: refused, naming it', () => {
    expect(problem(() => checkOutputDirectory('/proc/nope/out', '--out'))).toMatch(
      /^--out: .*\/proc is on procfs, a kernel filesystem that holds no files: cannot make \/proc\/nope\/out/,
    );
    expect(problem(() => checkOutputDirectory('/sys/nope', '--out'))).toMatch(/^--out: .*\/sys is on sysfs/);
  });

  it('nothing is made by the check', () => {
    const out = join(tmp, 'not-yet', 'out');
    expect(problem(() => checkOutputDirectory(out, '--out'))).toBe('accepted');
    expect(existsSync(join(tmp, 'not-yet'))).toBe(false);
  });
});
