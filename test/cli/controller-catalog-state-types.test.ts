/**
 * A controller restarted with a catalog that lacks an instance type its state's instances ran (a `catalog refresh
 * --families` that left the family out, a hand-edited file) still bills them: the bundled catalog's type stands in,
 * with a warning naming it, and is not planned with; an instance of it the rounds would still place on refuses the
 * start, naming it and the file. Through the real CLI.
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { catalogToFile } from '../../src/core/catalog.js';
import { ensureBuiltCli } from '../helpers/built-cli.js';
import {
  CONTROLLER_START_TIMEOUT_MS,
  killLocalLeftovers,
  spawnLocalController,
  startLocalController,
  until,
  type StartedController,
} from '../helpers/local-controller.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-catalog-state-types-'));
const started: StartedController[] = [];

beforeAll(() => ensureBuiltCli());

afterAll(async () => {
  for (const c of started)
    if (c.process.exitCode === null) {
      c.process.kill('SIGTERM');
      await c.exited;
    }
  for (const c of started) killLocalLeftovers(c.stateDir);
  rmSync(scratch, { recursive: true, force: true });
});

/** The bundled catalog without `typeName` (and its spot pools), written to a file. */
function catalogWithout(typeName: string): string {
  const file = catalogToFile(loadCatalogFile());
  const path = join(scratch, `without-${typeName}.json`);
  writeFileSync(
    path,
    JSON.stringify({
      ...file,
      types: file.types.filter((t) => t.name !== typeName),
      ...(file.spot === undefined
        ? {}
        : { spot: { ...file.spot, offerings: file.spot.offerings.filter((o) => o.type !== typeName) } }),
    }),
  );
  return path;
}

/**
 * A state directory whose store holds one instance of `typeName` that ran an hour, two hours ago (`ended`), or that
 * has run since then (still running as far as the state knows).
 */
function stateWithInstance(
  name: string,
  typeName: string,
  ended = true,
): { stateDir: string; instanceId: string } {
  const stateDir = join(scratch, name);
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  let now = Math.floor(Date.now() / 1000) - 7200;
  const store = new SqliteStateStore(join(stateDir, 'state.db'), { nowSeconds: () => now });
  try {
    const inst = store.createInstance({ typeName });
    store.setInstanceState(inst.id, 'launching', { cloudId: `local-${inst.id}` });
    store.setInstanceState(inst.id, 'running');
    now += 3600;
    if (ended) store.setInstanceState(inst.id, 'terminated');
    return { stateDir, instanceId: inst.id };
  } finally {
    store.close();
  }
}

describe('a controller started with a catalog that lacks a type its state ran', () => {
  it("bills its ended instances at the bundled catalog's price, and says so", async () => {
    const { stateDir, instanceId } = stateWithInstance('bundled-fallback', 'c7i.large');
    const ctl = await startLocalController(stateDir, { args: ['--catalog', catalogWithout('c7i.large')] });
    started.push(ctl);
    expect(ctl.stderr()).toContain(
      `the catalog ${join(scratch, 'without-c7i.large.json')} lacks c7i.large, which this state's instances ran: ` +
        "they are billed at the bundled catalog's prices, and not launched again",
    );
    const costs = await ctl.api('GET', '/v1/costs');
    expect(costs.status, costs.text).toBe(200);
    const line = (costs.json as { byInstance: { id: string; cost: number }[] }).byInstance.find(
      (i) => i.id === instanceId,
    );
    // An hour at the bundled on-demand price of c7i.large, not $0.
    expect(line?.cost).toBeCloseTo(0.08925, 6);
  }, 120_000);

  it('refuses to start while an instance of the type still runs, naming it and the file', async () => {
    const { stateDir, instanceId } = stateWithInstance('still-running', 'c7i.large', false);
    const path = catalogWithout('c7i.large');
    const ctl = await spawnLocalController(stateDir, { args: ['--catalog', path] });
    started.push(ctl);
    // It exits, or serves (a start whose rounds would fail on the instance's type).
    const outcome = await until(
      'the controller to exit or serve',
      () => ctl.process.exitCode ?? (ctl.stdout().includes('API http://') ? 'served' : undefined),
      CONTROLLER_START_TIMEOUT_MS,
    );
    expect(outcome).toBe(2);
    expect(ctl.stderr()).toContain(`fleetwise: invalid input: ${path}\n`);
    expect(ctl.stderr()).toContain(
      `types: the catalog lacks c7i.large, the type of ${instanceId} (running): the rounds could not place on them`,
    );
    expect(ctl.stdout()).not.toContain('API http://');
  }, 120_000);
});
