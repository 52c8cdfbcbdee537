import { linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { ColocationTable } from '../../src/scheduler/colocation-table.js';
import { serializedColocationTableSchema } from '../../src/scheduler/colocation-table-schema.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { unseenPairFooter } from '../../src/cli/commands/colocation.js';
import { catalog, rig } from '../controller/controller-fixtures.js';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * `fleetwise colocation` as users run it (the built CLI in a subprocess) against real controllers' APIs: one whose
 * Eva has learned co-location throughputs, one planning with a baseline that learns none.
 */

const ADMIN = 'admin-token-cli-colocation-0123456789';
const TEAM = 'team-token-cli-colocation-0123456789a';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-colocation-'));

/** resnet18 at 0.999 beside cyclegan (twice), gpt2 at 0.79 beside resnet18 (once), over Eva's prior of 0.95. */
function learned(): ColocationTable {
  const table = new ColocationTable(0.95);
  table.record('resnet18', ['cyclegan'], 0.999);
  table.record('resnet18', ['cyclegan'], 0.999);
  table.record('gpt2', ['resnet18'], 0.79);
  return table;
}

let eva: ApiServer;
let baseline: ApiServer;

function cli(server: ApiServer, args: readonly string[], token = ADMIN): Promise<CliResult> {
  return runCli(['colocation', ...args], {
    ...process.env,
    FLEETWISE_SERVER: server.url,
    FLEETWISE_TOKEN: token,
  });
}

beforeAll(async () => {
  ensureBuiltCli();
  const withEva = rig(
    {},
    { scheduler: new EvaScheduler(catalog, { learnedColocation: learned().toJSON() }) },
  );
  withEva.store.addTeamToken('vision', TEAM, 'test');
  const withBaseline = rig({}, { scheduler: new NoPackingScheduler(catalog) });
  eva = await startApiServer(withEva.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
  baseline = await startApiServer(withBaseline.controller, {
    listen: '127.0.0.1:0',
    adminToken: ADMIN,
    catalog,
  });
}, 120_000);

afterAll(async () => {
  await eva?.close();
  await baseline?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('fleetwise colocation (CLI subprocess)', () => {
  it('lists what Eva learned, the pairs that slow a workload most first, with the prior for pairs not seen', async () => {
    const out = await cli(eva, []);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    const lines = out.stdout.split('\n');
    expect(lines[0]).toMatch(/^WORKLOAD\s+BESIDE\s+THROUGHPUT\s+OBSERVED$/);
    expect(lines[1]).toMatch(/^gpt2\s+resnet18\s+0\.790\s+1$/);
    expect(lines[2]).toMatch(/^resnet18\s+cyclegan\s+0\.999\s+2$/);
    // The prior Eva plans unseen pairs with: (0.95 + 0.999 + 0.79) / 3.
    expect(out.stdout).toContain(
      'a pair not yet observed is priced at 0.913: the mean of the configured 0.950 and the 2 rates observed of workloads in pairs alone together',
    );
  });

  it('states the rate an unseen pair is priced at, however much was learned', () => {
    expect(unseenPairFooter(new ColocationTable(0.9).toJSON())).toBe(
      'a pair not yet observed is priced at 0.900 (the configured rate: no pair observed alone together yet)',
    );
    const one = new ColocationTable(0.95);
    one.record('gpt2', ['resnet18'], 0.75);
    // Sets of three are no pair: they leave the prior as it is.
    one.record('gpt2', ['resnet18', 'cyclegan'], 0.5);
    expect(unseenPairFooter(one.toJSON())).toBe(
      'a pair not yet observed is priced at 0.850: the mean of the configured 0.950 and the 1 rate observed of workloads in pairs alone together',
    );
    // One pair seen together gives each side's rate: two rates, not two pairs.
    const both = new ColocationTable(0.95);
    both.record('resnet', ['bert'], 0.8);
    both.record('bert', ['resnet'], 0.9);
    expect(unseenPairFooter(both.toJSON())).toBe(
      'a pair not yet observed is priced at 0.883: the mean of the configured 0.950 and the 2 rates observed of workloads in pairs alone together',
    );
  });

  it("is the operator's: it names every team's workloads, so a team token is refused", async () => {
    const out = await cli(eva, [], TEAM);
    expect(out.code).toBe(1);
    expect(out.stderr).toContain('answered 403');
    expect(out.stdout).toBe('');
  });

  it('writes the table for simulate --colocation-table with --out, and gives it whole with --json', async () => {
    const file = join(scratch, 'learned.json');
    const out = await cli(eva, ['--out', file, '--json']);
    expect(out.code, out.stderr).toBe(0);
    const expected = learned().toJSON();
    expect(JSON.parse(out.stdout)).toEqual({ table: expected });
    expect(serializedColocationTableSchema.parse(JSON.parse(readFileSync(file, 'utf8')))).toEqual(expected);
  });

  it('says a baseline learns none, and refuses to write a table it does not have', async () => {
    const out = await cli(baseline, []);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toMatch(/learns no co-location/);
    expect(JSON.parse((await cli(baseline, ['--json'])).stdout)).toEqual({ table: null });
    const refused = await cli(baseline, ['--out', join(scratch, 'none.json')]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--out[\s\S]*learns no co-location/);
    const nowhere = await cli(eva, ['--out', join(scratch, 'no-such-dir', 'x.json')]);
    expect(nowhere.code).toBe(2);
    expect(nowhere.stderr).toMatch(/--out[\s\S]*no-such-dir is not a directory/);
  });

  it("never writes the table over a controller's state database, nor into its state directory", async () => {
    const stateDir = join(scratch, 'state');
    mkdirSync(stateDir);
    const stateDb = join(stateDir, 'state.db');
    const store = new SqliteStateStore(stateDb);
    store.addTeamToken('vision', TEAM, 'test');
    store.close();
    const before = readFileSync(stateDb);
    linkSync(stateDb, join(scratch, 'hard-link.json'));
    const database =
      /invalid input: --out\n {2}- .* is a SQLite database, which looks like a controller's state database: it will not be overwritten/;
    const directory =
      /invalid input: --out\n {2}- .* is in .*state, a fleetwise controller's state directory \(it holds state\.db\): write it elsewhere/;
    const cases: [string, RegExp][] = [
      [stateDb, database],
      [join(scratch, 'hard-link.json'), database],
      [join(stateDir, 'state.db-wal'), directory],
      [join(stateDir, 'learned.json'), directory],
    ];
    for (const [target, message] of cases) {
      const out = await cli(eva, ['--out', target]);
      expect(out.code, target).toBe(2);
      expect(out.stderr, target).toMatch(message);
      expect(out.stdout).toBe('');
    }
    expect(readFileSync(stateDb).equals(before)).toBe(true);
    const reopened = new SqliteStateStore(stateDb);
    expect(reopened.teamForToken(TEAM)).toBe('vision');
    reopened.close();
  });
});
