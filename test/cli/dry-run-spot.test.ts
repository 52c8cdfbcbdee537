import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dryRunSpotQuote } from '../../src/controller/api/dry-run-spot.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { offeringsOf } from '../../src/core/spot.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';
import { schedulerCaps } from '../../src/round/plan-caps.js';
import { catalog, rig } from '../controller/controller-fixtures.js';
import { CLI, ensureBuiltCli, runCli } from '../helpers/built-cli.js';

/**
 * A dry run of a job that may use spot, on a controller that buys spot, quotes it at its host's cheapest spot price
 * besides on demand: where spot is bought, on-demand quotes overstate what the job will cost about twofold.
 */

const book = new PriceBook(catalog);

function spec(spot: 'never' | 'allowed' | 'preferred'): JobSpec {
  return validateJobSpec(
    {
      name: `job-${spot}`,
      team: 'research',
      tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 2, 4] }, replicas: 2 }],
      spot,
    },
    'spec',
    book,
  );
}

describe('the dry run’s spot quote', () => {
  it('prices each replica at its standalone host’s cheapest spot pool', () => {
    const quote = dryRunSpotQuote(spec('allowed'), book, true);
    const host = book.minType({ c7i: [0, 2, 4] })?.name as string;
    const cheapest = Math.min(
      ...offeringsOf(catalog.spot as NonNullable<typeof catalog.spot>, host).map((o) => o.pricePerHour),
    );
    expect(quote?.tasks).toEqual([
      expect.objectContaining({ name: 'main', instanceType: host, costPerHour: cheapest }),
    ]);
    expect(quote?.costPerHour).toBeCloseTo(2 * cheapest, 9);
  });

  it('quotes nothing where spot is not bought: no spot market, or a job that never runs on spot', () => {
    expect(dryRunSpotQuote(spec('allowed'), book, false)).toBeUndefined();
    expect(dryRunSpotQuote(spec('never'), book, true)).toBeUndefined();
  });
});

/** A real controller that buys spot, behind its API on a socket. */
const ADMIN = 'admin-token-dry-run-spot-0123456789abcdef';
let server: ApiServer;
let workDir = '';

beforeAll(async () => {
  ensureBuiltCli();
  expect(existsSync(CLI), `${CLI} is missing: run npm run build`).toBe(true);
  workDir = mkdtempSync(join(tmpdir(), 'fleetwise-dry-run-spot-'));
  const r = rig(
    {},
    { spotMarket: true, schedulerRecipe: { kind: 'eva', options: { caps: schedulerCaps({}), spot: true } } },
  );
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
}, 240_000);

afterAll(async () => {
  await server?.close();
  if (workDir !== '') rmSync(workDir, { recursive: true, force: true });
});

describe('submit --dry-run (CLI subprocess)', () => {
  it('shows the spot quote of a job that may use spot, and none for one that never does', async () => {
    const file = (spot: string) => {
      const path = join(workDir, `${spot}.yaml`);
      writeFileSync(
        path,
        `name: job-${spot}\nteam: research\nspot: ${spot}\ntasks:\n  - name: main\n    image: busybox:latest\n` +
          `    replicas: 2\n    demand:\n      c7i: [0, 2, 4]\n`,
      );
      return path;
    };
    const env = { ...process.env, FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: ADMIN };
    const allowed = await runCli(['submit', file('allowed'), '--dry-run'], env);
    expect(allowed.stderr).toBe('');
    expect(allowed.code).toBe(0);
    const quote = dryRunSpotQuote(spec('allowed'), book, true);
    const host = quote?.tasks[0];
    expect(allowed.stdout).toMatch(/^cost {7}\$\d+\.\d\d\/hour alone /m);
    expect(allowed.stdout).toContain(
      `on spot    $${(quote?.costPerHour ?? 0).toFixed(2)}/hour alone at the cheapest spot price of its host ` +
        `(${host?.instanceType} $${(host?.costPerHour ?? 0).toFixed(2)}/h in ${host?.zone})`,
    );
    const never = await runCli(['submit', file('never'), '--dry-run'], env);
    expect(never.code).toBe(0);
    expect(never.stdout).not.toContain('on spot');
  });
});
