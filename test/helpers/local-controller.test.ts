import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuiltCli } from './built-cli.js';
import { startLocalController } from './local-controller.js';

/**
 * A controller that exits before it serves fails startLocalController at once with what it printed, rather than after
 * the wait meant for a slow start (beyond this file's test timeout: a wait for it fails these tests).
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-local-controller-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** What startLocalController rejected with; it must not resolve. */
async function failedStart(stateDir: string, args: readonly string[] = []): Promise<string> {
  const outcome = await startLocalController(stateDir, { args }).then(
    async (started) => {
      started.process.kill('SIGKILL');
      await started.exited;
      return new Error('the controller started');
    },
    (error: unknown) => error,
  );
  expect(outcome).toBeInstanceOf(Error);
  return (outcome as Error).message;
}

describe('startLocalController and a controller that exits first (CLI subprocess)', () => {
  // A rebuild of dist/ when it is stale can take minutes on a loaded machine.
  beforeAll(() => ensureBuiltCli(), 240_000);

  it('fails with the stderr of a controller started with a flag it does not know', async () => {
    const message = await failedStart(join(scratch, 'bad-flag'), ['--no-such-flag']);
    // The exit, not the wait for the API, ended the start: its status and stderr are in the message.
    expect(message).toMatch(/^the controller exited \(2\) before it served its API/);
    expect(message).toContain("error: unknown option '--no-such-flag'");
    expect(message).not.toContain('timed out');
  });

  it('fails with the stderr of a controller whose state directory is a file', async () => {
    const stateDir = join(scratch, 'a-file');
    writeFileSync(stateDir, '');
    const message = await failedStart(stateDir);
    expect(message).toMatch(/^the controller exited \(1\) before it served its API/);
    expect(message).toContain(`EEXIST: file already exists, mkdir '${stateDir}'`);
  });
});
