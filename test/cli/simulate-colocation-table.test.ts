import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { SerializedColocationTable } from '../../src/scheduler/colocation-table.js';
import { serializedColocationTableSchema } from '../../src/scheduler/colocation-table-schema.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

/**
 * `simulate --save-colocation-table` and `--colocation-table` as users run them (the built CLI in a subprocess): a run
 * saves what its Eva learned of co-location, and a later run, in either runtime, starts from it.
 */
const PAI = ['simulate', '--format', 'eva', '--jobs', '40', '--scheduler', 'eva', '--json'];

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-colocation-table-'));

function readTable(path: string): SerializedColocationTable {
  return serializedColocationTableSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
}

function observations(table: SerializedColocationTable): Map<string, number> {
  return new Map(table.entries.map((e) => [`${e.target} | ${e.others.join(',')}`, e.count]));
}

function total(counts: ReadonlyMap<string, number>): number {
  return [...counts.values()].reduce((a, b) => a + b, 0);
}

let cold: Map<string, number>;

beforeAll(async () => {
  ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
  const r = await runCli([...PAI, '--save-colocation-table', join(scratch, 'cold.json')]);
  expect(r.code, r.stderr).toBe(0);
  cold = observations(readTable(join(scratch, 'cold.json')));
}, 120_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('simulate --colocation-table', () => {
  it('saves what Eva learned: the co-locations it observed, with how often', () => {
    expect(cold.size).toBeGreaterThan(0);
    expect([...cold.values()].every((count) => count >= 1)).toBe(true);
  });

  it('starts the same run from a saved table in both runtimes: what it knew is kept, and more is learned on top', async () => {
    for (const runtime of ['engine', 'controller']) {
      const saved = join(scratch, `warm-${runtime}.json`);
      const r = await runCli([
        ...PAI,
        '--runtime',
        runtime,
        '--colocation-table',
        join(scratch, 'cold.json'),
        '--save-colocation-table',
        saved,
      ]);
      expect(r.code, r.stderr).toBe(0);
      const warm = observations(readTable(saved));
      // The run is the cold one again, so alone it would learn the same counts; started from them, it has them twice
      // over where it met the same co-locations.
      for (const [key, count] of cold) expect(warm.get(key), key).toBeGreaterThanOrEqual(count);
      expect(total(warm), runtime).toBeGreaterThan(total(cold));
    }
  }, 180_000);

  it('names the flag or field and why, before running anything', async () => {
    const stateDir = join(scratch, 'state');
    mkdirSync(stateDir);
    const stateDb = join(stateDir, 'state.db');
    new SqliteStateStore(stateDb).close();
    const before = readFileSync(stateDb);
    const bad = join(scratch, 'bad.json');
    writeFileSync(
      bad,
      JSON.stringify({ defaultRate: 1.2, entries: [{ target: 'a', others: [], mean: 0.9, count: 0 }] }),
    );
    const cases: [string[], RegExp][] = [
      [
        ['--colocation-table', bad],
        /bad\.json[\s\S]*defaultRate \(line 1\): must be ≤ 1[\s\S]*entries\.0\.others \(line 1\)[\s\S]*entries\.0\.count \(line 1\): must be ≥ 1/,
      ],
      [
        ['--colocation-table', join(scratch, 'missing.json')],
        /--colocation-table[\s\S]*cannot read .*missing\.json/,
      ],
      [
        ['--scheduler', 'no-packing', '--colocation-table', join(scratch, 'cold.json')],
        /only Eva learns co-location/,
      ],
      [
        ['--scheduler', 'eva,eva-rp', '--save-colocation-table', join(scratch, 'x.json')],
        /exactly one Eva run; this command makes 2/,
      ],
      [['--save-colocation-table', join(scratch, 'no-such-dir', 'x.json')], /no-such-dir is not a directory/],
      // A controller's state: its database is never overwritten, nor anything beside it.
      [
        ['--save-colocation-table', stateDb],
        /invalid input: --save-colocation-table","details":\[".*state\.db is a SQLite database, which looks like a controller's state database: it will not be overwritten/,
      ],
      [
        ['--save-colocation-table', join(stateDir, 'table.json')],
        /invalid input: --save-colocation-table","details":\[".* is in .*state, a fleetwise controller's state directory \(it holds state\.db\): write it elsewhere/,
      ],
    ];
    for (const [args, message] of cases) {
      const r = await runCli([...PAI, ...args]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stdout).toBe('');
    }
    expect(readFileSync(stateDb).equals(before)).toBe(true);
  }, 60_000);
});
