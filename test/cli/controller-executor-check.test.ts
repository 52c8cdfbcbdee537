import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { setUpFleet } from '../../src/cli/commands/controller/provider-setup.js';
import { secretFilesIn } from '../../src/cli/commands/controller/secrets.js';
import type { ControllerState } from '../../src/cli/controller-state.js';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import { silentLogger } from '../../src/controller/seams.js';
import { ValidationError } from '../../src/core/validation.js';

/**
 * `fleetwise controller --provider local --executor docker` with no Docker engine to reach fails at start, naming the
 * flag and where it looked, within a bounded time: otherwise every worker it launched would go silent (or fail its
 * tasks' starts) and be replaced in a loop.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fw-executor-check-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function setUpWith(dockerHost: string): Promise<unknown> {
  const stateDir = join(scratch, 'state');
  mkdirSync(stateDir, { recursive: true });
  const config = loadControllerConfig({
    flags: { provider: 'local', region: 'us-east-1', stateDir, executor: 'docker' },
    env: {},
  });
  return setUpFleet({
    config,
    catalog: loadCatalogFile(),
    env: { DOCKER_HOST: dockerHost },
    // Not reached: the engine is checked before the fleet's state is used.
    state: {} as ControllerState,
    secretFiles: secretFilesIn(stateDir),
    log: silentLogger,
  }).catch((e: unknown) => e);
}

describe('the local controller with --executor docker', () => {
  it('fails at start when no engine answers at DOCKER_HOST', async () => {
    const socket = join(scratch, 'no-engine.sock');
    const error = await setUpWith(`unix://${socket}`);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as Error).message).toMatch(
      new RegExp(
        `^--executor: docker: no Docker engine answers at unix://${socket} \\(.*(ENOENT|connect).*\\); `,
      ),
    );
    expect((error as Error).message).toMatch(/--executor process \(or auto\)$/);
  });

  it('fails within its bound when the engine hangs', async () => {
    const socket = join(scratch, 'hung.sock');
    const held: Socket[] = [];
    const server = createServer((s) => held.push(s));
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    try {
      const began = Date.now();
      const error = await setUpWith(`unix://${socket}`);
      expect(Date.now() - began).toBeLessThan(10_000);
      expect((error as Error).message).toMatch(/did not answer a ping within 5 s/);
    } finally {
      for (const s of held) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
