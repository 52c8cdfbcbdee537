import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runDown } from '../../src/cli/commands/down.js';
import { ValidationError } from '../../src/core/validation.js';

/** `fleetwise down --state-dir` given a file (or a path through one) names the flag as bad input: no errno, exit 2. */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-down-file-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('fleetwise down --state-dir on a file', () => {
  it('is no state directory, and says it is not a directory', async () => {
    const file = join(scratch, 'passwd');
    writeFileSync(file, 'root:x:0:0::/root:/bin/sh\n');
    for (const stateDir of [file, join(file, 'below')]) {
      const error = await runDown({ stateDir }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).source).toBe('--state-dir');
      expect((error as ValidationError).problems).toEqual([
        `${stateDir} is not a controller's state directory (not a directory): give the directory the controller was started with`,
      ]);
    }
  });
});
