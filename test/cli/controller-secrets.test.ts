import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  adminTokenFor,
  ensureSecretFile,
  metricsTokenFor,
} from '../../src/cli/commands/controller/secrets.js';
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

  it('gets a new token when empty, owner-only even when the empty file was not', () => {
    const path = join(scratch, 'empty');
    writeFileSync(path, '\n', { mode: 0o644 });
    const made = ensureSecretFile(path);
    expect(made.created).toBe(true);
    expect(readFileSync(path, 'utf8')).toBe(`${made.value}\n`);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });
});

describe('a token from the environment beside a token file', () => {
  const ENV_TOKEN = 'admin-token-from-the-environment-0123';

  it('removes a file holding another token, with a warning naming it: the file is not the token in force', () => {
    const path = join(scratch, 'admin-token-older');
    writeFileSync(path, 'an-older-admin-token-0123456789\n', { mode: 0o600 });
    const warnings: string[] = [];
    const source = adminTokenFor({ FLEETWISE_ADMIN_TOKEN: ENV_TOKEN }, path, (line) => warnings.push(line));
    expect(source).toEqual({ value: ENV_TOKEN, file: undefined });
    expect(existsSync(path)).toBe(false);
    expect(warnings).toEqual([
      `warning: removed ${path}: it held another token than FLEETWISE_ADMIN_TOKEN, which this controller takes; ` +
        'give clients the token FLEETWISE_ADMIN_TOKEN holds',
    ]);

    const metrics = join(scratch, 'metrics-token-older');
    writeFileSync(metrics, 'an-older-metrics-token-0123456789\n', { mode: 0o600 });
    metricsTokenFor({ FLEETWISE_METRICS_TOKEN: ENV_TOKEN }, metrics, (line) => warnings.push(line));
    expect(existsSync(metrics)).toBe(false);
    expect(warnings[1]).toMatch(
      new RegExp(`^warning: removed ${metrics}: it held another token than FLEETWISE_METRICS_TOKEN`),
    );
  });

  it('leaves a file holding the same token, and makes none', () => {
    const same = join(scratch, 'admin-token-same');
    writeFileSync(same, `${ENV_TOKEN}\n`, { mode: 0o600 });
    const missing = join(scratch, 'admin-token-missing');
    const warnings: string[] = [];
    const env = { FLEETWISE_ADMIN_TOKEN: ENV_TOKEN };
    expect(adminTokenFor(env, same, (line) => warnings.push(line)).value).toBe(ENV_TOKEN);
    expect(adminTokenFor(env, missing, (line) => warnings.push(line)).value).toBe(ENV_TOKEN);
    expect(readFileSync(same, 'utf8')).toBe(`${ENV_TOKEN}\n`);
    expect(existsSync(missing)).toBe(false);
    expect(warnings).toEqual([]);
  });

  it('starts on the environment token when the file cannot be read, saying so and leaving it', () => {
    const unreadable = join(scratch, 'admin-token-a-directory');
    mkdirSync(unreadable);
    const warnings: string[] = [];
    const source = adminTokenFor({ FLEETWISE_ADMIN_TOKEN: ENV_TOKEN }, unreadable, (line) =>
      warnings.push(line),
    );
    expect(source).toEqual({ value: ENV_TOKEN, file: undefined });
    expect(existsSync(unreadable)).toBe(true);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      new RegExp(`^warning: could not read ${unreadable} \\(EISDIR.*\\); FLEETWISE_ADMIN_TOKEN is used$`),
    );
  });
});
