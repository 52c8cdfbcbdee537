import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureSecretFile } from '../../src/cli/commands/controller/secrets.js';
import { ValidationError } from '../../src/core/validation.js';

/**
 * The state directory's token files: a token found in one is held to what one from the environment is (at least 16
 * characters, no whitespace inside; the trailing newline an editor or `echo` adds is fine), and the error names the
 * file; an empty file gets a new token.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-secrets-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('a token file in the state directory', () => {
  it('is taken without its trailing newline, and left owner-only', () => {
    const path = join(scratch, 'good');
    writeFileSync(path, 'admin-token-from-a-file-0123456789\n', { mode: 0o644 });
    expect(ensureSecretFile(path)).toEqual({ value: 'admin-token-from-a-file-0123456789', created: false });
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it.each([
    ['a short token', 'abc\n', 'has 3 characters; a token needs at least 16'],
    ['whitespace inside', 'admin-token 0123456789abcdef\n', 'contains whitespace'],
    ['two lines', 'admin-token-0123456789\nanother-line-0123456789\n', 'contains whitespace'],
  ])('is refused with %s, naming the file and how to fix it', (_label, content, problem) => {
    const path = join(scratch, `bad-${content.length}`);
    writeFileSync(path, content, { mode: 0o600 });
    const error = (() => {
      try {
        ensureSecretFile(path);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).source).toBe(path);
    expect((error as ValidationError).problems).toEqual([
      expect.stringMatching(
        new RegExp(`^${problem}.*\\(delete the file to have a new token generated there\\)$`),
      ),
    ]);
    expect(readFileSync(path, 'utf8')).toBe(content); // left as it was for the operator to see
  });

  it('gets a new token when empty', () => {
    const path = join(scratch, 'empty');
    writeFileSync(path, '\n');
    const made = ensureSecretFile(path);
    expect(made.created).toBe(true);
    expect(readFileSync(path, 'utf8')).toBe(`${made.value}\n`);
  });
});
