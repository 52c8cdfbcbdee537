/**
 * Spot prices in `fleetwise catalog refresh`: DescribeSpotPriceHistory against moto_server (which answers a price for
 * every pool of the types it knows), the catalog's `spot` section built from it with the base catalog's interruption
 * classes (the most pessimistic class where the base has none), in process and through the built CLI.
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
          spotPrices: spot,
          now: () => new Date('2026-11-24T12:00:00Z'),
          stdout: (text) => (stdout += text),
          stderr: (text) => (stderr += text),
        },
      );
      const file = JSON.parse(stdout) as { types: { name: string }[]; spot: SpotSectionJson };
      expect(file.spot.snapshotDate).toBe('2026-11-24');
      expect(file.spot.source).toMatch(
        /^EC2 DescribeSpotPriceHistory \(Linux\/UNIX\) for us-east-1, 2026-11-24T12:00:00\.000Z;/,
      );
      const names = new Set(file.types.map((t) => t.name));
      expect(file.spot.offerings.every((o) => names.has(o.type) && o.pricePerHour > 0)).toBe(true);
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
      // moto prices every pool at $0.00001: one answer is raised above c7i.large's on-demand $0.08925, as a pool in
      // short supply can be.
      const raised: SpotPriceApi = {
        async describeSpotPriceHistory(input) {
          const page = await spot.describeSpotPriceHistory(input);
          return {
            ...page,
            SpotPriceHistory: (page.SpotPriceHistory ?? []).map((e) =>
              e.InstanceType === 'c7i.large' && e.AvailabilityZone === 'us-east-1a'
                ? { ...e, SpotPrice: '0.2' }
                : e,
            ),
          };
        },
      };
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
      expect(file.spot.offerings.every((o) => o.pricePerHour === 0.00001)).toBe(true);
      expect(stderr).toContain(
        '; 1 pools priced above their on-demand price left out (EC2 sells spot at most at it)',
      );
    });

    it('`fleetwise catalog refresh --out` writes the spot section beside a catalog that loads back; --no-spot leaves it out', async () => {
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
      const written = JSON.parse(readFileSync(out, 'utf8')) as { spot?: SpotSectionJson };
      expect(written.spot?.offerings.some((o) => o.type === 'r7i.large')).toBe(true);
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
