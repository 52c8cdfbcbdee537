/**
 * `fleetwise catalog refresh` with no spot pool left (every EC2 price above its type's on-demand price, or under the
 * least a catalog holds) writes no spot section, and says so: a section without offerings would read as a spot
 * market to `--spot on`. Against moto_server for DescribeInstanceTypes and DescribeSpotPriceHistory, with the recorded
 * GetProducts answers.
 */
import { expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient } from '../../src/cloud/aws/ec2-api.js';
import { fixturePricingApi } from '../../src/cloud/aws/pricing-fixture.js';
import { spotPriceApiFromClient, type SpotPriceApi } from '../../src/cloud/aws/spot-prices.js';
import { parseCatalog } from '../../src/core/catalog.js';
import { runCatalogRefresh } from '../../src/cli/commands/catalog.js';
import { PRICING_FIXTURES } from '../cloud/aws/fixture-paths.js';
import { describeWithMoto } from '../helpers/moto.js';

/** `api`'s answers with every pool priced `price` (a decimal string, as EC2 gives it). */
function pricedAt(api: SpotPriceApi, price: string): SpotPriceApi {
  return {
    async describeSpotPriceHistory(input) {
      const page = await api.describeSpotPriceHistory(input);
      return {
        ...page,
        SpotPriceHistory: (page.SpotPriceHistory ?? []).map((e) => ({ ...e, SpotPrice: price })),
      };
    },
  };
}

describeWithMoto(
  'catalog refresh with no spot pool left (moto)',
  (moto) => {
    const refresh = async (spotPrice: string): Promise<{ file: Record<string, unknown>; stderr: string }> => {
      const client = createEc2Client(moto.clientOptions);
      let stdout = '';
      let stderr = '';
      await runCatalogRefresh(
        { region: 'us-east-1', families: 'c7i' },
        {
          pricing: fixturePricingApi(PRICING_FIXTURES),
          ec2: ec2ApiFromClient(client),
          spotPrices: pricedAt(spotPriceApiFromClient(client), spotPrice),
          now: () => new Date('2026-11-24T12:00:00Z'),
          stdout: (text) => (stdout += text),
          stderr: (text) => (stderr += text),
        },
      );
      return { file: JSON.parse(stdout) as Record<string, unknown>, stderr };
    };
    const noSection =
      'warning: no spot pool is left, so the catalog has no spot section (it offers no spot instances)\n';

    it('leaves the section out when every pool is priced above its on-demand price, with a warning', async () => {
      const { file, stderr } = await refresh('50'); // above every c7i type's on-demand price
      expect(file).not.toHaveProperty('spot');
      expect(stderr).toMatch(
        /^spot: 0 pools of 0 types; .*; \d+ pools priced above their on-demand price left out/,
      );
      expect(stderr.endsWith(noSection)).toBe(true);
      expect(parseCatalog(file).spot).toBeUndefined();
    });

    it('leaves it out when every pool is priced under a catalog’s least price too', async () => {
      const { file, stderr } = await refresh('0.00001');
      expect(file).not.toHaveProperty('spot');
      expect(stderr).toMatch(/; \d+ pools priced under \$0\.0001\/h left out/);
      expect(stderr.endsWith(noSection)).toBe(true);
    });

    it('keeps a section with pools, and warns of nothing', async () => {
      const { file, stderr } = await refresh('0.03');
      expect((file.spot as { offerings: unknown[] }).offerings.length).toBeGreaterThan(0);
      expect(stderr).not.toContain('warning:');
    });
  },
  { resetBeforeEach: false },
);
