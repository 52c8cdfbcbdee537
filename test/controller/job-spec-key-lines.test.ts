import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import { ValidationError } from '../../src/core/validation.js';

/** A problem that names a field points at the field's key, not at its value a line or more below. */

const catalog = loadCatalogFile();

function problemsOf(text: string): readonly string[] {
  try {
    parseJobSpec(text, 'spec.yaml', catalog);
  } catch (e) {
    if (e instanceof ValidationError) return e.problems;
    throw e;
  }
  throw new Error('expected the spec to be rejected');
}

const TASKS = `tasks:
  - name: a
    command: [sh, -c, "sleep 1"]
    demand:
      any: [0, 0.5, 0.25]
`;

describe('job spec problems name the line of the key', () => {
  it('an unknown top-level key whose block mapping starts on the next line', () => {
    const problems = problemsOf(`name: t\nteam: examples\n${TASKS}envv:\n  A: 1\n`);
    expect(problems).toEqual([expect.stringMatching(/^envv: unknown field .*\(line 8\)$/)]);
  });

  it('an unknown key nested in a section, with its value below it', () => {
    const problems = problemsOf(`name: t\nteam: examples\n${TASKS}checkpoint:\n  signl:\n    SIGTERM\n`);
    expect(problems).toEqual([
      expect.stringMatching(/^checkpoint\.signl: unknown field, did you mean signal\?.*\(line 9\)$/),
    ]);
  });

  it('an unknown key of a task, with a block sequence below it', () => {
    const problems = problemsOf(`name: t\nteam: examples\n${TASKS}    imagee:\n      - busybox\n`);
    expect(problems).toEqual([
      expect.stringMatching(/^tasks\.0\.imagee: unknown field, did you mean image\?.*\(line 8\)$/),
    ]);
  });

  it('a known key whose value below it has the wrong type', () => {
    const problems = problemsOf(`name: t\nteam: examples\nnoMoveSeconds:\n  - 5\n${TASKS}`);
    expect(problems).toEqual([expect.stringMatching(/^noMoveSeconds: .*\(line 3\)$/)]);
  });

  it('an item of a sequence by its own line, and a missing field by its parent key', () => {
    const problems = problemsOf(
      `name: t\nteam: examples\ntasks:\n  - name: a\n    command: [sh]\n    demand:\n      any: [0, 0.5, 0.25]\n  -\n    name: b\n    command: [sh]\n`,
    );
    expect(problems).toEqual([expect.stringMatching(/^tasks\.1\.demand: expected .*\(line 9\)$/)]);
  });
});
