import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { runDown } from '../../src/cli/commands/down.js';
import { stopLocalFleet } from '../../src/cli/local-fleet-stop.js';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { LocalProvider } from '../../src/cloud/local/local-provider.js';
import { WORKER_EXIT_FILE } from '../../src/protocol/worker-exit.js';
import { isWorkerOf } from '../../src/cloud/local/worker-spawner.js';
import { killProcessGroups } from '../helpers/processes-under.js';
import { fakeProcessWorkerSpawner } from '../helpers/fake-worker-spawner.js';

/**
 * Stopping local mode ends each instance when its own worker exited, not when the slowest worker is done: a local
 * instance is billed while its worker runs. The workers are real processes from the real spawner, a stand-in script
 * for `fleetwise worker` that exits a set time after SIGTERM (as a worker checkpointing its tasks takes its time).
 */
const tmp = mkdtempSync(join(tmpdir(), 'fw-local-stop-billing-'));
const FAKE_WORKER = join(tmp, 'fake-worker.mjs');
const spawned: number[] = [];

writeFileSync(
  FAKE_WORKER,
  [
    "import { readFileSync, writeFileSync } from 'node:fs';",
    "import { join } from 'node:path';",
    "const dir = process.argv[process.argv.indexOf('--work-dir') + 1];",
    "process.on('SIGTERM', () => {",
    "  const ms = Number(readFileSync(join(dir, 'stop-ms'), 'utf8'));",
    '  setTimeout(() => process.exit(0), ms);',
    '});',
    "writeFileSync(join(dir, 'ready'), '');",
    'setInterval(() => {}, 1000);',
    '',
  ].join('\n'),
);

afterAll(() => {
  killProcessGroups(spawned);
  rmSync(tmp, { recursive: true, force: true });
});

function providerOn(stateDir: string): LocalProvider {
  return new LocalProvider({
    stateFile: join(stateDir, 'local-instances.json'),
    instancesDir: join(stateDir, 'instances'),
    catalog: loadCatalogFile(),
    spawner: fakeProcessWorkerSpawner(FAKE_WORKER),
  });
}

/** Two instances whose workers take `stopMs` each to exit once asked; resolves when both are up. */
async function launchWorkers(
  provider: LocalProvider,
  stopMs: readonly number[],
): Promise<{ id: string; launchMs: number }[]> {
  const launched: { id: string; launchMs: number }[] = [];
  for (const [n, ms] of stopMs.entries()) {
    const result = await provider.launch({
      typeName: 'c7i.large',
      idempotencyToken: `tok-${n}`,
      clusterName: 'billing',
      planId: 'plan-1',
      instanceKey: `slot-${n}`,
    });
    const id = result.instanceIds[0] as string;
    const record = provider.instances().find((i) => i.instanceId === id);
    if (record?.pid === undefined) throw new Error(`no worker pid for ${id}`);
    spawned.push(record.pid);
    writeFileSync(join(record.dir, 'stop-ms'), String(ms));
    launched.push({ id, launchMs: record.launchTimeMs });
  }
  for (const { id } of launched) {
    const dir = provider.instances().find((i) => i.instanceId === id)?.dir as string;
    for (let i = 0; ; i += 1) {
      try {
        readFileSync(join(dir, 'ready'));
        break;
      } catch {
        if (i > 200) throw new Error(`the worker of ${id} never started`);
        await new Promise((r) => setTimeout(r, 25));
      }
    }
  }
  return launched;
}

/** Each instance's recorded end, ms after the stop began. */
function endsAfter(provider: LocalProvider, stopBeganMs: number): Map<string, number> {
  return new Map(
    provider.instances().map((i) => [i.instanceId, (i.terminatedAtMs ?? Number.NaN) - stopBeganMs]),
  );
}

const SLOW_MS = 1500;

describe('a local stop', () => {
  it("ends each instance when its own worker exited (the controller's stop)", async () => {
    const provider = providerOn(join(tmp, 'controller'));
    const [fast, slow] = await launchWorkers(provider, [0, SLOW_MS]);
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const began = Date.now();
    let stopped: { cloudId: string; atSeconds: number }[];
    try {
      stopped = await stopLocalFleet(provider, {
        keepWorkers: false,
        stateDir: join(tmp, 'controller'),
        giveUpSeconds: 0,
        graceSeconds: 10,
      });
    } finally {
      out.mockRestore();
    }
    const ends = endsAfter(provider, began);
    expect(ends.get(fast!.id)).toBeLessThan(SLOW_MS / 2);
    expect(ends.get(slow!.id)).toBeGreaterThanOrEqual(SLOW_MS);
    // What the controller records as the instances' ends (stopped with it) is the same.
    expect(new Map(stopped.map((s) => [s.cloudId, Math.round(s.atSeconds * 1000) - began]))).toEqual(ends);
    const listed = await provider.list('billing', { includeTerminated: true });
    expect(listed.find((i) => i.instanceId === fast!.id)?.endedAt?.getTime()).toBe(
      (ends.get(fast!.id) as number) + began,
    );
  });

  it('ends each instance when its own worker exited (fleetwise down)', async () => {
    const stateDir = join(tmp, 'down');
    const provider = providerOn(stateDir);
    const [fast, slow] = await launchWorkers(provider, [0, SLOW_MS]);
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const began = Date.now();
    try {
      await runDown({ stateDir, graceSeconds: '10' });
    } finally {
      out.mockRestore();
    }
    const ends = endsAfter(providerOn(stateDir), began);
    expect(ends.get(fast!.id)).toBeLessThan(SLOW_MS / 2);
    expect(ends.get(slow!.id)).toBeGreaterThanOrEqual(SLOW_MS);
  });

  it('ends an instance whose worker gave up before the stop when that worker exited (fleetwise down)', async () => {
    const stateDir = join(tmp, 'down-after-give-up');
    const provider = providerOn(stateDir);
    const [gaveUp, running] = await launchWorkers(provider, [0, 0]);
    const record = provider.instances().find((i) => i.instanceId === gaveUp!.id);
    // As a worker giving up leaves it: its exit recorded in its directory, then the process gone.
    const exitedAtMs = Date.now();
    writeFileSync(join(record!.dir, WORKER_EXIT_FILE), JSON.stringify({ exitedAtMs, reason: 'gave-up' }));
    killProcessGroups([record!.pid as number]);
    for (let i = 0; isWorkerOf(record!.pid as number, gaveUp!.id); i += 1) {
      if (i > 200) throw new Error(`the worker of ${gaveUp!.id} did not die`);
      await new Promise((r) => setTimeout(r, 25));
    }
    await new Promise((r) => setTimeout(r, 200));
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const began = Date.now();
    try {
      await runDown({ stateDir, graceSeconds: '10' });
    } finally {
      out.mockRestore();
    }
    const after = new Map(
      providerOn(stateDir)
        .instances()
        .map((i) => [i.instanceId, i]),
    );
    expect(after.get(gaveUp!.id)?.terminatedAtMs).toBe(exitedAtMs);
    expect(after.get(gaveUp!.id)?.stoppedBy).toBe('down');
    // The other, stopped by `down` itself, ends when its worker exited after the signal.
    expect(after.get(running!.id)?.terminatedAtMs).toBeGreaterThanOrEqual(began);
  });
});
