/**
 * Spot prices in `fleetwise catalog refresh`: DescribeSpotPriceHistory against moto_server (which answers a price for
 * every pool of the types it knows), the catalog's `spot` section built from it with the base catalog's interruption
 * classes (the most pessimistic class where the base has none), in process and through the built CLI. moto answers
 * $0.00001 for every pool, under any price a catalog holds: the in-process runs price its answers as EC2 would.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient, type Ec2Api } from '../../../src/cloud/aws/ec2-api.js';
import { fixturePricingApi } from '../../../src/cloud/aws/pricing-fixture.js';
import {
  fetchSpotPrices,
  spotPriceApiFromClient,
  type SpotPriceApi,
} from '../../../src/cloud/aws/spot-prices.js';
import { BUNDLED_CATALOG_PATH, loadCatalogFile, PROJECT_ROOT } from '../../../src/cloud/catalog-file.js';
import { runCatalogRefresh } from '../../../src/cli/commands/catalog.js';
import { describeWithMoto } from '../../helpers/moto.js';
import { PRICING_FIXTURES } from './fixture-paths.js';

const CLI = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-spot-refresh-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface SpotSectionJson {
  snapshotDate: string;
  source: string;
  offerings: { type: string; zone: string; pricePerHour: number; interruption: string }[];
}

/** The bundled catalog with a spot section classing one pool (as a catalog with the Advisor's classes has them). */
function baseWithClasses(): string {
  const base = JSON.parse(readFileSync(BUNDLED_CATALOG_PATH, 'utf8')) as Record<string, unknown>;
  const path = join(scratch, 'base.json');
  writeFileSync(
    path,
    JSON.stringify({
      ...base,
      spot: {
        snapshotDate: '2026-01-01',
        source: 'test',
        offerings: [{ type: 'c7i.large', zone: 'us-east-1a', pricePerHour: 0.03, interruption: '<5%' }],
      },
    }),
  );
  return path;
}

/** `api`'s answers with each pool's price replaced by `priceOf(type, zone)` (a decimal string, as EC2 gives it). */
function repriced(api: SpotPriceApi, priceOf: (type: string, zone: string) => string): SpotPriceApi {
  return {
    async describeSpotPriceHistory(input) {
      const page = await api.describeSpotPriceHistory(input);
      return {
        ...page,
        SpotPriceHistory: (page.SpotPriceHistory ?? []).map((e) => ({
          ...e,
          SpotPrice: priceOf(e.InstanceType ?? '', e.AvailabilityZone ?? ''),
        })),
      };
    },
  };
}

describeWithMoto(
  'spot prices in catalog refresh (moto)',
  (moto) => {
    let ec2: Ec2Api;
    let spot: SpotPriceApi;
    beforeAll(() => {
      const client = createEc2Client(moto.clientOptions);
      ec2 = ec2ApiFromClient(client);
      spot = spotPriceApiFromClient(client);
    });

    it('reads the newest Linux price of every pool of the types asked for', async () => {
      const prices = await fetchSpotPrices(spot, ['r7i.large', 'c7i.large'], new Date());
      const zones = [...new Set(prices.map((p) => p.zone))];
      expect(zones.length).toBeGreaterThanOrEqual(3);
      expect(zones.every((z) => z.startsWith('us-east-1'))).toBe(true);
      // Sorted by the order asked for, then zone; one entry per pool.
      expect(prices.map((p) => p.typeName)).toEqual([
        ...zones.map(() => 'r7i.large'),
        ...zones.map(() => 'c7i.large'),
      ]);
      expect(new Set(prices.map((p) => `${p.typeName}@${p.zone}`)).size).toBe(prices.length);
      expect(prices.every((p) => p.pricePerHour > 0)).toBe(true);
    });

    it('writes a spot section: prices from EC2, the base catalog’s classes, the worst class where it has none', async () => {
      let stdout = '';
      let stderr = '';
      await runCatalogRefresh(
        { region: 'us-east-1', families: 'c7i', base: baseWithClasses() },
        {
          pricing: fixturePricingApi(PRICING_FIXTURES),
          ec2,
          spotPrices: repriced(spot, () => '0.03'),
          now: () => new Date('2026-11-24T12:00:00Z'),
          stdout: (text) => (stdout += text),
          stderr: (text) => (stderr += text),
        },
      );
      const file = JSON.parse(stdout) as { types: { name: string }[]; spot: SpotSectionJson };
      expect(file.spot.offerings.length).toBeGreaterThan(0);
      expect(file.spot.snapshotDate).toBe('2026-11-24');
      expect(file.spot.source).toMatch(
        /^EC2 DescribeSpotPriceHistory \(Linux\/UNIX\) for us-east-1, 2026-11-24T12:00:00\.000Z;/,
      );
      const names = new Set(file.types.map((t) => t.name));
      expect(file.spot.offerings.every((o) => names.has(o.type) && o.pricePerHour === 0.03)).toBe(true);
      const classed = file.spot.offerings.filter((o) => o.interruption === '<5%');
      expect(classed.map((o) => [o.type, o.zone])).toEqual([['c7i.large', 'us-east-1a']]);
      expect(
        file.spot.offerings.filter((o) => o.interruption !== '<5%').every((o) => o.interruption === '>20%'),
      ).toBe(true);
      expect(stderr).toMatch(
        new RegExp(
          `^spot: ${file.spot.offerings.length} pools of \\d+ types.*; ${file.spot.offerings.length - 1} pools without a class in the base catalog get >20%\\n$`,
        ),
      );
    });

    it('leaves out a pool EC2 prices above its on-demand price and counts it, without failing the refresh', async () => {
      // One pool is priced above c7i.large's on-demand $0.08925, as a pool in short supply can be.
      const raised = repriced(spot, (type, zone) =>
        type === 'c7i.large' && zone === 'us-east-1a' ? '0.2' : '0.03',
      );
      let stdout = '';
      let stderr = '';
      await runCatalogRefresh(
        { region: 'us-east-1', families: 'c7i', base: baseWithClasses() },
        {
          pricing: fixturePricingApi(PRICING_FIXTURES),
          ec2,
          spotPrices: raised,
          now: () => new Date('2026-11-24T12:00:00Z'),
          stdout: (text) => (stdout += text),
          stderr: (text) => (stderr += text),
        },
      );
      const file = JSON.parse(stdout) as { spot: SpotSectionJson };
      const c7iLarge = file.spot.offerings.filter((o) => o.type === 'c7i.large').map((o) => o.zone);
      expect(c7iLarge.length).toBeGreaterThanOrEqual(2);
      expect(c7iLarge).not.toContain('us-east-1a');
      expect(file.spot.offerings.every((o) => o.pricePerHour === 0.03)).toBe(true);
      expect(stderr).toContain(
        '; 1 pools priced above their on-demand price left out (EC2 sells spot at most at it)',
      );
    });

    it('leaves out pools priced under $0.0001/h and counts them, writing a catalog that loads back', async () => {
      // One pool at a price a catalog holds, the rest at moto's $0.00001.
      const priced = repriced(spot, (type, zone) =>
        type === 'c7i.large' && zone === 'us-east-1a' ? '0.03' : '0.00001',
      );
      let stdout = '';
      let stderr = '';
      await runCatalogRefresh(
        { region: 'us-east-1', families: 'c7i', base: baseWithClasses() },
        {
          pricing: fixturePricingApi(PRICING_FIXTURES),
          ec2,
          spotPrices: priced,
          now: () => new Date('2026-11-24T12:00:00Z'),
          stdout: (text) => (stdout += text),
          stderr: (text) => (stderr += text),
        },
      );
      const file = JSON.parse(stdout) as { spot: SpotSectionJson };
      expect(file.spot.offerings.map((o) => [o.type, o.zone, o.pricePerHour])).toEqual([
        ['c7i.large', 'us-east-1a', 0.03],
      ]);
      expect(stderr).toMatch(
        /; \d+ pools priced under \$0\.0001\/h left out \(a catalog holds no such price\)/,
      );
      const path = join(scratch, 'under-minimum.json');
      writeFileSync(path, stdout);
      expect(loadCatalogFile(path).spot?.offerings).toHaveLength(1);
    });

    it('`fleetwise catalog refresh --out` writes a catalog that loads back, with no spot section when no pool is left; --no-spot leaves it out', async () => {
      const run = (args: string[]): Promise<{ code: number | null; stderr: string }> =>
        new Promise((resolve, reject) => {
          const child = spawn(process.execPath, [CLI, ...args], {
            env: { ...moto.childEnv, FLEETWISE_PRICING_FIXTURE_DIR: PRICING_FIXTURES },
            stdio: ['ignore', 'ignore', 'pipe'],
          });
          let stderr = '';
          child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
          child.once('error', reject);
          child.once('close', (code) => resolve({ code, stderr }));
        });
      const out = join(scratch, 'with-spot.json');
      const withSpot = await run([
        'catalog',
        'refresh',
        '--region',
        'us-east-1',
        '--families',
        'c7i,r7i',
        '--out',
        out,
      ]);
      expect(withSpot.code, withSpot.stderr).toBe(0);
      // moto's $0.00001 is no price a catalog holds: every pool is left out, and counted; a section without pools
      // would read as a spot market, so there is none, and the refresh says so.
      expect(withSpot.stderr).toMatch(/; \d+ pools priced under \$0\.0001\/h left out/);
      expect(withSpot.stderr).toContain(
        'warning: no spot pool is left, so the catalog has no spot section (it offers no spot instances)\n',
      );
      const written = JSON.parse(readFileSync(out, 'utf8')) as { spot?: SpotSectionJson };
      expect(written.spot).toBeUndefined();
      expect(loadCatalogFile(out).types.length).toBeGreaterThan(0);
      const bare = join(scratch, 'no-spot.json');
      const noSpot = await run([
        'catalog',
        'refresh',
        '--region',
        'us-east-1',
        '--families',
        'c7i',
        '--no-spot',
        '--out',
        bare,
      ]);
      expect(noSpot.code, noSpot.stderr).toBe(0);
      expect((JSON.parse(readFileSync(bare, 'utf8')) as { spot?: unknown }).spot).toBeUndefined();
    });
  },
  { resetBeforeEach: false },
);
