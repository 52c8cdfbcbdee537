import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { launchedOnSpot } from '../../src/controller/instance-market.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import type { SpotPreference } from '../../src/core/spot.js';
import { schedulerCaps } from '../../src/round/plan-caps.js';
import { catalog, jobSpec, liveRecords, rig, type Rig } from '../controller/controller-fixtures.js';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * How each instance was bought, in every view of the fleet: /v1/cluster and `fleetwise cluster` (and --json) say its
 * market, /metrics counts instances by market, and `fleetwise why` says where a job's tasks run, on spot or on demand
 * and, for a job that may use spot, why on demand where the records say. A real controller buying spot (Eva with spot
 * on) behind its API on a socket; the built CLI in a subprocess.
 */

const ADMIN = 'admin-token-cli-market-0123456789abcdef';

let r: Rig;
let server: ApiServer;
const ids: Record<string, string> = {};

function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { ...process.env, FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: ADMIN });
}

function spec(name: string, demand: JobSpec['tasks'][number]['demand'], spot: SpotPreference): JobSpec {
  return { ...jobSpec(name, demand, { expectedDurationSeconds: 36_000 }), spot };
}

beforeAll(async () => {
  ensureBuiltCli();
  expect(existsSync(CLI), `${CLI} is missing: run npm run build`).toBe(true);
  r = rig(
    {},
    {
      spotMarket: true,
      schedulerRecipe: { kind: 'eva', options: { caps: schedulerCaps({}), spot: true } },
    },
  );
  // No spot capacity for memory-optimized types: a spot launch of one is bought on demand (a market fallback).
  for (const t of catalog.types) if (t.name.startsWith('r7i')) r.cloud.noSpotCapacity.add(t.name);
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
  ids['spot'] = r.controller.submit(spec('on-spot', { c7i: [0, 2, 4] }, 'preferred'), 'research').id;
  ids['never'] = r.controller.submit(spec('never', { c7i: [0, 2, 4] }, 'never'), 'research').id;
  ids['fallback'] = r.controller.submit(spec('fallback', { r7i: [0, 2, 16] }, 'preferred'), 'research').id;
  await r.controller.runRound('submitted');
}, 240_000);

afterAll(async () => {
  await server?.close();
});

describe('the market in the views of the fleet', () => {
  it('/v1/cluster and `fleetwise cluster --json` give each instance its market, as it is billed', async () => {
    const live = liveRecords(r.store);
    const expected = Object.fromEntries(
      live.map((i) => [i.id, launchedOnSpot(r.store, i.id) ? 'spot' : 'on-demand']),
    );
    // The fleet this is about: both markets.
    expect(new Set(Object.values(expected))).toEqual(new Set(['spot', 'on-demand']));
    const out = await cli(['cluster', '--json']);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    const view = JSON.parse(out.stdout) as { instances: { id: string; market: string }[] };
    expect(Object.fromEntries(view.instances.map((i) => [i.id, i.market]))).toEqual(expected);
  });

  it('`fleetwise cluster` has a MARKET column', async () => {
    const out = await cli(['cluster']);
    expect(out.code).toBe(0);
    const [header, ...rows] = out.stdout.split('\n');
    expect(header).toMatch(/^INSTANCE\s+CLOUD ID\s+TYPE\s+STATE\s+ZONE\s+MARKET\s+\$\/HOUR\s+TASKS$/);
    for (const i of liveRecords(r.store)) {
      const row = rows.find((l) => l.startsWith(`${i.id} `));
      expect(row, i.id).toMatch(launchedOnSpot(r.store, i.id) ? / spot / : / on-demand /);
    }
  });

  it('/metrics counts instances by market', async () => {
    const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } });
    const text = await res.text();
    const counted = (market: string) =>
      [...text.matchAll(new RegExp(`^fleetwise_instances\\{[^}]*market="${market}"[^}]*\\} (\\d+)$`, 'gm'))]
        .map((m) => Number(m[1]))
        .reduce((a, b) => a + b, 0);
    const live = liveRecords(r.store);
    const onSpot = live.filter((i) => launchedOnSpot(r.store, i.id)).length;
    expect(counted('spot')).toBe(onSpot);
    expect(counted('on-demand')).toBe(live.length - onSpot);
  });

  it('`fleetwise why` says the market of the job’s instances, and why a spot-allowing job is on demand', async () => {
    const line = async (job: string) => (await cli(['why', job])).stdout.split('\n')[1] ?? '';
    expect(await line(ids['spot'] as string)).toMatch(/^market: inst-\d+ \(c7i\.\S+\) on spot$/);
    expect(await line(ids['never'] as string)).toMatch(
      /^market: inst-\d+ \(c7i\.\S+\) on demand \(the job never runs on spot\)$/,
    );
    expect(await line(ids['fallback'] as string)).toMatch(
      /^market: inst-\d+ \(r7i\.\S+\) on demand: its launch asked for spot and got on demand: .*no spot capacity/,
    );
    const json = JSON.parse((await cli(['why', ids['fallback'] as string, '--json'])).stdout) as {
      market: { spot: string; instances: { market: string; onDemandBecause?: string }[] };
    };
    expect(json.market.spot).toBe('preferred');
    expect(json.market.instances).toEqual([
      expect.objectContaining({ market: 'on-demand', onDemandBecause: expect.stringContaining('spot') }),
    ]);
  });
});
