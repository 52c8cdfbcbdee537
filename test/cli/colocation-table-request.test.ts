import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { colocationTableRequest } from '../../src/cli/commands/colocation-table-file.js';
import { ValidationError } from '../../src/core/validation.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-colocation-request-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

it('refuses a --save-colocation-table that is one of --out’s report files, before any run', () => {
  const out = join(scratch, 'report');
  mkdirSync(out);
  const refusal = (() => {
    try {
      colocationTableRequest({ saveColocationTable: join(out, 'report.json'), out }, 1);
    } catch (e) {
      return e;
    }
    return undefined;
  })();
  expect(refusal).toBeInstanceOf(ValidationError);
  expect((refusal as ValidationError).source).toBe('--save-colocation-table');
  expect((refusal as ValidationError).problems).toEqual([
    `${join(out, 'report.json')} is --out's report.json: give the table a path of its own`,
  ]);
  // Beside the report, not one of its files: accepted.
  expect(colocationTableRequest({ saveColocationTable: join(out, 'table.json'), out }, 1)).toEqual({
    evaLearnedColocation: undefined,
    returnLearnedColocation: true,
  });
});
