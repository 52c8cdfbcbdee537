/**
 * `--queue-config FILE` problems read as a controller config's do: each names the file, the field with its line and,
 * for an unknown key, the field it most likely meant; a key given twice is named with the line of the repeat.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readQueueConfigFile } from '../../src/cli/commands/sim-flags.js';
import { refusal } from '../helpers/validation-refusal.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-queue-config-lines-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let files = 0;
/** A queue config file of `lines` (line 1 is the first). */
function file(lines: readonly string[]): string {
  const path = join(scratch, `q${(files += 1)}.yaml`);
  writeFileSync(path, [...lines, ''].join('\n'));
  return path;
}

const refused = (lines: readonly string[]) => {
  const path = file(lines);
  const e = refusal(() => readQueueConfigFile(path));
  expect(e.source).toBe(path);
  return e.problems;
};

describe('a --queue-config file with a queue: section', () => {
  it('names each unknown key with its line and the field it likely meant, in every section', () => {
    expect(
      refused([
        'queue:',
        '  classes:',
        '    - { id: all, weight: 1, orderin: srpt }', // line 3
        '  premption: { enabled: false }', // line 4
        'caps:',
        '  maxCostPerHr: 3', // line 6
        'scheduler: { name: eva, paybakMargin: 3 }', // line 7
        'priceOverrides:',
        '  discountPercnt: 20', // line 9
      ]),
    ).toEqual([
      'queue.classes.0.orderin (line 3): unknown field, did you mean ordering?',
      'queue.premption (line 4): unknown field, did you mean preemption?',
      'caps.maxCostPerHr (line 6): unknown field, did you mean maxCostPerHour?',
      'scheduler.paybakMargin (line 7): unknown field, did you mean paybackMargin?',
      'priceOverrides.discountPercnt (line 9): unknown field, did you mean discountPercent?',
    ]);
  });

  it('names a bad value with its line, the queue section and the sections beside it in one refusal', () => {
    expect(
      refused([
        'queue:',
        '  classes:',
        '    - { id: small, weight: -1 }', // line 3
        'roundSeconds: 0', // line 4
      ]),
    ).toEqual([
      'queue.classes.0.weight (line 3): Too small: expected number to be >0',
      'roundSeconds (line 4): must be > 0',
    ]);
  });

  it('says where a misplaced or misspelt section goes, and that a controller setting goes in --config', () => {
    const problems = refused([
      'queue:',
      '  classes: [{ id: all, weight: 1 }]',
      'cap: { maxInstances: 4 }', // line 3
      'maxCostPerHour: 20', // line 4
      'cluster: prod', // line 5
    ]);
    expect(problems).toEqual([
      'cap (line 3): unknown field, did you mean caps?',
      'maxCostPerHour (line 4): a field of the caps section: put it under caps:',
      expect.stringMatching(
        /^cluster \(line 5\): a controller config's setting: .* give a whole controller config with --config$/,
      ),
    ]);
  });

  it('names a key given twice with the line and column of the repeat, on one line', () => {
    expect(
      refused(['queue:', '  classes: [{ id: a, weight: 1 }]', 'queue:', '  classes: [{ id: b, weight: 1 }]']),
    ).toEqual(['not valid YAML: the key "queue" is given more than once, again at line 3, column 1']);
  });

  it('names a misspelled queue: key as such, not as a bare config missing its classes', () => {
    const problems = refused(['queu:', '  classes: [{ id: all, weight: 1 }]']);
    expect(problems).toContain('queu (line 1): unknown field, did you mean queue?');
    expect(problems.some((p) => p.startsWith('classes'))).toBe(false);
  });
});

describe('a bare --queue-config file (the queue section alone)', () => {
  it('names an unknown key with its line and the field it likely meant, beside a bad value', () => {
    expect(
      refused([
        'classes:',
        '  - id: all',
        '    weight: 1',
        '    ordering: srpt',
        'clasifyBy: size', // line 5
      ]),
    ).toEqual(['clasifyBy (line 5): unknown field, did you mean classifyBy?']);
    expect(refused(['classes:', '  - id: all', '    weight: -1'])).toEqual([
      'classes.0.weight (line 3): Too small: expected number to be >0',
    ]);
  });

  it('still reads a good one', () => {
    const path = file(['classes:', '  - { id: all, weight: 1, ordering: srpt }']);
    expect(readQueueConfigFile(path).queue.classes).toEqual([{ id: 'all', weight: 1, ordering: 'srpt' }]);
  });
});
