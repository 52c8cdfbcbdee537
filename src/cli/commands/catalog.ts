import { randomUUID } from 'node:crypto';
import { rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import { catalogToFile, parseCatalog, type Catalog } from '../../core/catalog.js';
import { parseWith } from '../../core/validation.js';
// The AWS SDK clients take seconds to load: they are imported when a catalog command runs, not on every CLI start.
import type { Ec2Api } from '../../cloud/aws/ec2-api.js';
import type { PricingApi } from '../../cloud/aws/pricing.js';
import { fixturePricingApi, PRICING_FIXTURE_DIR_ENV } from '../../cloud/aws/pricing-fixture.js';
import { BUNDLED_CATALOG_PATH, loadCatalogFile } from '../../cloud/catalog-file.js';

const refreshOptionsSchema = z.object({
  region: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d+$/, 'an AWS region like us-east-1'),
  families: z
    .string()
    .optional()
    .transform((s) =>
      s === undefined
        ? undefined
        : s
            .split(',')
            .map((f) => f.trim())
            .filter((f) => f !== ''),
    )
    .pipe(
      z
        .array(z.string().regex(/^[a-z][a-z0-9-]*$/, 'a family like c7i'))
        .min(1)
        .optional(),
    ),
  out: z.string().min(1).optional(),
  base: z.string().min(1).default(BUNDLED_CATALOG_PATH),
});

export interface CatalogRefreshDeps {
  readonly pricing: PricingApi;
  readonly ec2: Pick<Ec2Api, 'describeInstanceTypes'>;
  readonly now: () => Date;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

/** Write atomically (temp file + rename), so a failed refresh never leaves a half-written catalog behind. */
async function writeFileAtomic(path: string, text: string): Promise<void> {
  const temp = join(dirname(path), `.${randomUUID()}.tmp`);
  try {
    await writeFile(temp, text, 'utf8');
    await rename(temp, path);
  } catch (e) {
    await rm(temp, { force: true });
    throw e;
  }
}

export async function runCatalogRefresh(rawOptions: unknown, deps: CatalogRefreshDeps): Promise<Catalog> {
  const options = parseWith(refreshOptionsSchema, rawOptions, 'catalog refresh options');
  const base = loadCatalogFile(options.base);
  const { refreshCatalog } = await import('../../cloud/aws/pricing.js');
  const { catalog, warnings } = await refreshCatalog({
    pricing: deps.pricing,
    ec2: deps.ec2,
    region: options.region,
    base,
    ...(options.families === undefined ? {} : { families: options.families }),
  });
  for (const warning of warnings) deps.stderr(`warning: ${warning}\n`);
  const source =
    `AWS Price List API (GetProducts: on-demand, Linux, shared tenancy) and EC2 DescribeInstanceTypes for ` +
    `${options.region}, refreshed ${deps.now().toISOString()}; launch delays kept from ${options.base} ` +
    `(new types get their family's median).`;
  const file = catalogToFile(catalog, source);
  parseCatalog(file, 'refreshed catalog'); // what we write must load again
  const text = `${JSON.stringify(file, null, 2)}\n`;
  if (options.out === undefined) {
    deps.stdout(text);
  } else {
    await writeFileAtomic(resolve(options.out), text);
    deps.stderr(`wrote ${catalog.types.length} instance types for ${options.region} to ${options.out}\n`);
  }
  return catalog;
}

/** The real Pricing and EC2 clients, from the SDK's standard configuration; or the recorded fixtures (test hook). */
async function defaultDeps(region: string): Promise<CatalogRefreshDeps> {
  const { createEc2Client, ec2ApiFromClient } = await import('../../cloud/aws/ec2-api.js');
  const { createPricingClient, pricingApiFromClient } = await import('../../cloud/aws/pricing.js');
  const fixtureDir = process.env[PRICING_FIXTURE_DIR_ENV];
  return {
    pricing:
      fixtureDir === undefined || fixtureDir === ''
        ? pricingApiFromClient(createPricingClient())
        : fixturePricingApi(fixtureDir),
    ec2: ec2ApiFromClient(createEc2Client({ region })),
    now: () => new Date(),
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
  };
}

/** `fleetwise catalog refresh`: rebuild an instance catalog from AWS's current prices and capacities. */
export function registerCatalog(program: Command): Command {
  const catalog = program
    .command('catalog')
    .description('instance catalogs (capacities, prices, launch delays)');
  catalog
    .command('refresh')
    .description(
      'build a catalog from the AWS Price List API (on-demand Linux prices) and EC2 DescribeInstanceTypes, ' +
        'keeping the launch delays of the base catalog',
    )
    .requiredOption('--region <region>', 'EC2 region whose prices and types to fetch, e.g. us-east-1')
    .option(
      '--families <list>',
      "comma-separated instance families (default: the base catalog's, e.g. p3,c7i,r7i)",
    )
    .option('--out <file>', 'write the catalog here instead of standard output')
    .option(
      '--base <file>',
      'catalog whose launch delays (and fallback capacities) to keep',
      BUNDLED_CATALOG_PATH,
    )
    .addHelpText(
      'after',
      // The test hook (PRICING_FIXTURE_DIR_ENV, recorded GetProducts responses) is left out: users have no use for it.
      `\nCredentials, AWS_ENDPOINT_URL_EC2 and AWS_ENDPOINT_URL_PRICING follow the AWS SDK's standard configuration.`,
    )
    .action(async (rawOptions: unknown) => {
      // Validate before loading the AWS clients, so a typo fails at once.
      const options = parseWith(refreshOptionsSchema, rawOptions, 'catalog refresh options');
      await runCatalogRefresh(rawOptions, await defaultDeps(options.region));
    });
  return catalog;
}
