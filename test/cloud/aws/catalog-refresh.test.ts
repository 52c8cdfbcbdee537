/**
 * Catalog refresh end to end: prices from the recorded GetProducts fixtures, capacities from moto's
 * DescribeInstanceTypes, and `fleetwise catalog refresh` run as a subprocess of the built CLI (dist/, which
 * `npm test` builds first).
 */
import { spawn } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Catalog } from '../../../src/core/catalog.js';
import { createEc2Client, ec2ApiFromClient, type Ec2Api } from '../../../src/cloud/aws/ec2-api.js';
import { fetchInstanceCapacities, refreshCatalog } from '../../../src/cloud/aws/pricing.js';
import { fixturePricingApi } from '../../../src/cloud/aws/pricing-fixture.js';
import { BUNDLED_CATALOG_PATH, loadCatalogFile, PROJECT_ROOT } from '../../../src/cloud/catalog-file.js';
import { ValidationError } from '../../../src/core/validation.js';
import { runCatalogRefresh } from '../../../src/cli/commands/catalog.js';
import { describeWithMoto } from '../../helpers/moto.js';
import { PRICING_FIXTURES } from './fixture-paths.js';

const bundled: Catalog = loadCatalogFile();
const CLI = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');
const P3_WARNING =
  /^warning: (p3\.\w+): DescribeInstanceTypes in us-east-1 did not describe it .* taken from the base catalog$/;

/** The built CLI must be at least as new as the sources this test exercises. */
function assertCliBuilt(): void {
  const pairs = [
    ['src/cli/main.ts', 'dist/cli/main.js'],
    ['src/cli/commands/catalog.ts', 'dist/cli/commands/catalog.js'],
    ['src/cloud/aws/pricing.ts', 'dist/cloud/aws/pricing.js'],
    ['src/cloud/aws/pricing-fixture.ts', 'dist/cloud/aws/pricing-fixture.js'],
  ];
  for (const [src, out] of pairs as [string, string][]) {
    const built = join(PROJECT_ROOT, out);
    if (!existsSync(built) || statSync(built).mtimeMs < statSync(join(PROJECT_ROOT, src)).mtimeMs)
      throw new Error(
        `${out} is missing or older than ${src}: run \`npm run build\` first (\`npm test\` does)`,
      );
  }
}

function runCli(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The refreshed catalog without the sizes the bundled one lacks, for a field-by-field comparison. */
function withoutMetal(catalog: Catalog): Catalog['types'] {
  return catalog.types.filter((t) => !t.name.includes('.metal-'));
}

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-catalog-refresh-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describeWithMoto(
  'catalog refresh against moto and recorded prices',
  (moto) => {
    let ec2: Ec2Api;
    beforeAll(() => {
      ec2 = ec2ApiFromClient(createEc2Client(moto.clientOptions));
    });

    it('reads capacities from DescribeInstanceTypes: GPUs from GpuInfo, memory MiB → GiB', async () => {
      const capacities = await fetchInstanceCapacities(ec2, ['c7i', 'r7i', 'p3', 'g5']);
      expect(capacities.get('c7i.large')).toEqual([0, 2, 4]);
      expect(capacities.get('r7i.48xlarge')).toEqual([0, 192, 1536]);
      expect(capacities.get('g5.12xlarge')).toEqual([4, 48, 192]);
      expect(capacities.get('g5.xlarge')).toEqual([1, 4, 16]);
      expect([...capacities.keys()].some((n) => n.startsWith('p3.'))).toBe(false); // moto lacks p3
      expect([...capacities.keys()].every((n) => /^(c7i|r7i|g5)\./.test(n))).toBe(true);
    });

    it('rebuilds the bundled catalog exactly (prices, capacities, delays) plus the new metal sizes', async () => {
      const { catalog, warnings } = await refreshCatalog({
        pricing: fixturePricingApi(PRICING_FIXTURES),
        ec2,
        region: 'us-east-1',
        base: bundled,
      });
      expect(withoutMetal(catalog)).toEqual(bundled.types);
      expect(
        catalog.types
          .filter((t) => t.name.includes('.metal-'))
          .map((t) => [t.name, t.costPerHour, t.capacity]),
      ).toEqual([
        ['c7i.metal-24xl', 4.284, [0, 96, 192]],
        ['c7i.metal-48xl', 8.568, [0, 192, 384]],
        ['r7i.metal-24xl', 6.3504, [0, 96, 768]],
        ['r7i.metal-48xl', 12.7008, [0, 192, 1536]],
      ]);
      expect(warnings).toHaveLength(3);
      expect(warnings.every((w) => /^p3\.\w+: DescribeInstanceTypes .* base catalog$/.test(w))).toBe(true);
    });

    it('`fleetwise catalog refresh --out` writes a catalog file that loads back', async () => {
      assertCliBuilt();
      const out = join(scratch, 'aws-us-east-1.json');
      const run = await runCli(
        ['catalog', 'refresh', '--region', 'us-east-1', '--families', 'p3,c7i,r7i', '--out', out],
        {
          ...moto.childEnv,
          FLEETWISE_PRICING_FIXTURE_DIR: PRICING_FIXTURES,
        },
      );
      expect(run.stderr).toContain(`wrote 25 instance types for us-east-1 to ${out}`);
      expect(run.code).toBe(0);
      expect(run.stdout).toBe('');
      const warnings = run.stderr.split('\n').filter((l) => l.startsWith('warning: '));
      expect(warnings.map((w) => P3_WARNING.exec(w)?.[1] ?? w)).toEqual([
        'p3.2xlarge',
        'p3.8xlarge',
        'p3.16xlarge',
        // moto's spot prices are all under $0.0001/h, so no pool is left.
        'warning: no spot pool is left, so the catalog has no spot section (it offers no spot instances)',
      ]);
      const written = loadCatalogFile(out);
      expect(written.region).toBe('us-east-1');
      expect(withoutMetal(written)).toEqual(bundled.types);
      expect(written.types).toHaveLength(25);
    });

    it('prints the catalog to stdout without --out (in process, with the same fixtures)', async () => {
      let stdout = '';
      const stderr: string[] = [];
      await runCatalogRefresh(
        { region: 'us-east-1', families: 'c7i' },
        {
          pricing: fixturePricingApi(PRICING_FIXTURES),
          ec2,
          now: () => new Date('2025-07-01T12:00:00Z'),
          stdout: (text) => (stdout += text),
          stderr: (text) => void stderr.push(text),
        },
      );
      expect(stderr).toEqual([]);
      const file = JSON.parse(stdout) as { types: { name: string }[]; source: string };
      expect(file.types.map((t) => t.name)).toEqual([
        'c7i.large',
        'c7i.xlarge',
        'c7i.2xlarge',
        'c7i.4xlarge',
        'c7i.8xlarge',
        'c7i.12xlarge',
        'c7i.16xlarge',
        'c7i.24xlarge',
        'c7i.metal-24xl',
        'c7i.48xlarge',
        'c7i.metal-48xl',
      ]);
      expect(file.source).toMatch(/^AWS Price List API .* us-east-1, refreshed 2025-07-01T12:00:00\.000Z;/);
    });

    it('names a bundled type the region neither prices nor describes instead of dropping it silently', async () => {
      // The recorded prices without p3.8xlarge; moto's DescribeInstanceTypes lacks every p3 type: like a region
      // that does not sell it.
      const fixtures = join(scratch, 'pricing-without-p3.8xlarge');
      mkdirSync(fixtures);
      for (const name of readdirSync(PRICING_FIXTURES).filter((n) => n.endsWith('.json')))
        copyFileSync(join(PRICING_FIXTURES, name), join(fixtures, name));
      const p3Path = join(fixtures, 'AmazonEC2-us-east-1-p3.json');
      const p3 = JSON.parse(readFileSync(p3Path, 'utf8')) as { PriceList: string[] };
      const before = p3.PriceList.length;
      p3.PriceList = p3.PriceList.filter(
        (entry) =>
          (JSON.parse(entry) as { product: { attributes: { instanceType: string } } }).product.attributes
            .instanceType !== 'p3.8xlarge',
      );
      expect(p3.PriceList.length).toBeLessThan(before);
      writeFileSync(p3Path, JSON.stringify(p3));
      let stdout = '';
      const stderr: string[] = [];
      await runCatalogRefresh(
        { region: 'us-east-1', families: 'p3', spot: false },
        {
          pricing: fixturePricingApi(fixtures),
          ec2,
          now: () => new Date('2025-07-01T12:00:00Z'),
          stdout: (text) => (stdout += text),
          stderr: (text) => void stderr.push(text),
        },
      );
      const file = JSON.parse(stdout) as { types: { name: string }[] };
      expect(file.types.map((t) => t.name)).toEqual(['p3.2xlarge', 'p3.16xlarge']);
      expect(stderr.filter((l) => l.includes('p3.8xlarge'))).toEqual([
        'warning: p3.8xlarge: in the base catalog but neither priced nor described by DescribeInstanceTypes in ' +
          'us-east-1; left out\n',
      ]);
    });

    it('refuses families that come back with no priced type before writing anything, naming each', async () => {
      const out = join(scratch, 'families.json');
      const stderr: string[] = [];
      const refresh = runCatalogRefresh(
        { region: 'us-east-1', families: 'c7i,c7x,r7', out, spot: false },
        {
          pricing: fixturePricingApi(PRICING_FIXTURES),
          ec2,
          now: () => new Date('2025-07-01T12:00:00Z'),
          stdout: () => undefined,
          stderr: (text) => void stderr.push(text),
        },
      );
      await expect(refresh).rejects.toThrow(ValidationError);
      await expect(refresh).rejects.toMatchObject({
        source: '--families',
        problems: [
          expect.stringMatching(/^c7x: no c7x instance type /),
          expect.stringMatching(/^r7: no r7 instance type /),
        ],
      });
      expect(existsSync(out)).toBe(false);
      expect(stderr.some((l) => l.startsWith('wrote '))).toBe(false);
    });

    it("keeps the base catalog's cross-zone traffic price in the refreshed catalog", async () => {
      const base = join(scratch, 'base-cross-zone.json');
      writeFileSync(
        base,
        JSON.stringify({
          ...JSON.parse(readFileSync(BUNDLED_CATALOG_PATH, 'utf8')),
          crossZonePricePerGiB: 0.02,
        }),
      );
      const out = join(scratch, 'refreshed-cross-zone.json');
      await runCatalogRefresh(
        { region: 'us-east-1', families: 'c7i', base, out, spot: false },
        {
          pricing: fixturePricingApi(PRICING_FIXTURES),
          ec2,
          now: () => new Date('2025-07-01T12:00:00Z'),
          stdout: () => undefined,
          stderr: () => undefined,
        },
      );
      const written = JSON.parse(readFileSync(out, 'utf8')) as {
        crossZonePricePerGiB?: number;
        source: string;
      };
      expect(written.crossZonePricePerGiB).toBe(0.02);
      expect(written.source).toContain(`launch delays and the cross-zone traffic price kept from ${base}`);
      expect(loadCatalogFile(out).crossZonePricePerGiB).toBe(0.02);
    });

    it('`fleetwise catalog refresh` rejects a bad region with a validation error (exit code 2)', async () => {
      assertCliBuilt();
      const env = { ...moto.childEnv, FLEETWISE_PRICING_FIXTURE_DIR: PRICING_FIXTURES };
      const bad = await runCli(['catalog', 'refresh', '--region', 'Mars-1', '--families', 'c7i,,P3'], env);
      expect(bad.code).toBe(2);
      expect(bad.stdout).toBe('');
      expect(bad.stderr).toContain('fleetwise: invalid input: catalog refresh options\n');
      expect(bad.stderr).toContain('  - region: an AWS region like us-east-1');
      expect(bad.stderr).toContain('  - families.1: a family like c7i');
    });
  },
  // Nothing here writes EC2 state: no need to reset moto between tests.
  { resetBeforeEach: false },
);
