/**
 * `catalog refresh --out` into a directory that is not there, onto a directory, or over a controller's state: refused
 * naming the flag, before any AWS call.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCatalogRefresh, type CatalogRefreshDeps } from '../../src/cli/commands/catalog.js';
import { ValidationError } from '../../src/core/validation.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-refresh-out-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const noAws = (): never => {
  throw new Error('no AWS call expected');
};
const deps: CatalogRefreshDeps = {
  pricing: { getProducts: noAws },
  ec2: { describeInstanceTypes: noAws },
  now: () => new Date('2026-01-01T00:00:00Z'),
  stdout: noAws,
  stderr: noAws,
};

async function refusal(out: string): Promise<ValidationError> {
  const e: unknown = await runCatalogRefresh({ region: 'us-east-1', out }, deps).catch((x: unknown) => x);
  if (e instanceof ValidationError) return e;
  throw new Error(`expected a ValidationError, got ${String(e)}`);
}

describe('catalog refresh --out', () => {
  it('names --out and the missing directory, not the hidden temp file', async () => {
    const dir = join(scratch, 'missing');
    expect(await refusal(join(dir, 'x.json'))).toMatchObject({
      source: '--out',
      problems: [`directory ${dir} does not exist`],
    });
  });

  it('names --out when its directory is a file', async () => {
    const plain = join(scratch, 'plain');
    writeFileSync(plain, '');
    expect(await refusal(join(plain, 'x.json'))).toMatchObject({
      source: '--out',
      problems: [`${plain} is not a directory`],
    });
  });

  it('names --out when it is a directory itself, and leaves nothing in it', async () => {
    const dir = join(scratch, 'a-directory');
    mkdirSync(dir);
    expect(await refusal(dir)).toMatchObject({
      source: '--out',
      problems: [`${dir} is a directory: give the path of the catalog file to write`],
    });
    expect(readdirSync(dir)).toEqual([]);
  });

  it("names --out when it would replace a controller's state database or write beside it", async () => {
    const stateDir = join(scratch, 'state');
    mkdirSync(stateDir);
    const db = join(stateDir, 'state.db');
    new SqliteStateStore(db).close();
    const before = readFileSync(db);
    expect((await refusal(db)).problems[0]).toMatch(
      /is a SQLite database, which looks like a controller's state/,
    );
    expect((await refusal(join(stateDir, 'catalog.json'))).problems[0]).toMatch(
      /state directory \(it holds state\.db\): write it elsewhere/,
    );
    expect(readFileSync(db).equals(before)).toBe(true);
  });
});
