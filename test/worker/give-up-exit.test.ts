import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readWorkerExit } from '../../src/cloud/local/worker-exit-record.js';
import { WORKER_EXIT_FILE } from '../../src/protocol/worker-exit.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { WorkerAgent } from '../../src/worker/agent.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { BOOTSTRAP, RecordingLogger } from './agent-fixtures.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

/**
 * A worker that gives up on its controller records when it exited in its work directory, where the local provider
 * reads it (a local instance is billed until then, not until a controller notices). The controller is a port nothing
 * listens on; the executor is the real process executor.
 */
const tmp = mkdtempSync(join(tmpdir(), 'fw-give-up-exit-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function agentOn(workDir: string, logger: RecordingLogger): WorkerAgent {
  return new WorkerAgent({
    // Nothing listens there: every registration is refused at once.
    connection: new ControllerClient(UNREACHABLE_URL),
    credentials: { launch: launchSecretCredential(BOOTSTRAP) },
    executor: new ProcessExecutor({ stateDir: join(workDir, 'executor') }),
    openStore: (location) => new FsObjectStore(location),
    cloudInstanceId: 'local-give-up',
    workDir,
    giveUpAfterSeconds: 0.3,
    logger,
  });
}

describe('a worker giving up', () => {
  it('records when it exited, in the file the local provider reads; a stop by signal records nothing', async () => {
    const workDir = join(tmp, 'gives-up');
    mkdirSync(workDir);
    // An earlier worker's record on this directory: this worker's run must not be ended at its time.
    const logger = new RecordingLogger();
    const stale = agentOn(workDir, logger);
    writeFileSync(join(workDir, WORKER_EXIT_FILE), JSON.stringify({ exitedAtMs: 1, reason: 'gave-up' }));
    expect(await stale.run(AbortSignal.abort())).toBe('stopped');
    expect(existsSync(join(workDir, WORKER_EXIT_FILE))).toBe(false);

    const began = Date.now();
    expect(await agentOn(workDir, logger).run(new AbortController().signal)).toBe('gave-up');
    const returned = Date.now();
    const exit = readWorkerExit(workDir);
    expect(exit?.reason).toBe('gave-up');
    // Once the give-up time had passed without an answer, and no later than run() returned.
    expect(exit?.exitedAtMs).toBeGreaterThanOrEqual(began + 300);
    expect(exit?.exitedAtMs).toBeLessThanOrEqual(returned);
    expect(logger.lines.some((l) => l.startsWith('warn giving up: no answer from the controller'))).toBe(
      true,
    );
  });

  it('an unreadable record dates nothing and fails nothing', () => {
    const workDir = join(tmp, 'unreadable');
    mkdirSync(workDir);
    const path = join(workDir, WORKER_EXIT_FILE);
    writeFileSync(path, JSON.stringify({ exitedAtMs: 'soon', reason: 'gave-up' }));
    // Unreadable, it dates nothing: the instance ends when its worker is found gone, and nothing fails on it.
    expect(readWorkerExit(workDir)).toBeUndefined();
    writeFileSync(path, '');
    expect(readWorkerExit(workDir)).toBeUndefined();
  });
});
