import { stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import { catalogToFile, parseCatalog, regionSchema, type Catalog } from '../../core/catalog.js';
import { isPricePerHour, MIN_COST_PER_HOUR } from '../../core/price-per-hour.js';
import type { SpotMarket } from '../../core/spot.js';
import { parseWith, ValidationError } from '../../core/validation.js';
// The AWS SDK clients take seconds to load: they are imported when a catalog command runs, not on every CLI start.
import type { Ec2Api } from '../../cloud/aws/ec2-api.js';
import type { PricingApi } from '../../cloud/aws/pricing.js';
import type { SpotPriceApi } from '../../cloud/aws/spot-prices.js';
import { fixturePricingApi, PRICING_FIXTURE_DIR_ENV } from '../../cloud/aws/pricing-fixture.js';
import { awsErrorCode, awsHttpStatus, configuredEndpoint } from '../../cloud/aws/client-config.js';
import { awsFailureKind } from '../../cloud/aws/failure-kind.js';
import { BUNDLED_CATALOG_PATH, loadCatalogFile } from '../../cloud/catalog-file.js';
import { writeFilesAtomically } from '../atomic-file.js';
import { checkOutputFile } from '../output-target.js';

const refreshOptionsSchema = z.object({
  region: regionSchema,
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
  /** False with --no-spot: no spot section is written. */
  spot: z.boolean().default(true),
});

export interface CatalogRefreshDeps {
  readonly pricing: PricingApi;
  readonly ec2: Pick<Ec2Api, 'describeInstanceTypes'>;
  /** DescribeSpotPriceHistory; absent, the catalog gets no spot section. */
  readonly spotPrices?: SpotPriceApi;
  readonly now: () => Date;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

/**
 * `--out` must name a file in a directory that exists (a file there is replaced), outside any controller's state:
 * refused naming the flag, and the directory or the path that is one.
 */
async function checkOut(out: string): Promise<void> {
  const path = resolve(out);
  const dir = dirname(path);
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(dir)).isDirectory();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ValidationError('--out', [
      code === 'ENOENT'
        ? `directory ${dir} does not exist`
        : `cannot use directory ${dir}: ${(e as Error).message}`,
    ]);
  }
  if (!isDirectory) throw new ValidationError('--out', [`${dir} is not a directory`]);
  // The rename onto a directory would fail only after every AWS call, naming the temp file.
  const existing = await stat(path).catch(() => undefined);
  if (existing?.isDirectory() === true)
    throw new ValidationError('--out', [
      `${path} is a directory: give the path of the catalog file to write`,
    ]);
  // Never a controller's state database, nor a file beside it.
  checkOutputFile(out, '--out');
}

export async function runCatalogRefresh(rawOptions: unknown, deps: CatalogRefreshDeps): Promise<Catalog> {
  const options = parseWith(refreshOptionsSchema, rawOptions, 'catalog refresh options');
  // Before any AWS call; and the write goes through a hidden temp file, whose name an error would show instead.
  if (options.out !== undefined) await checkOut(options.out);
  const base = loadCatalogFile(options.base);
  const { PRICING_API_REGION, refreshCatalog } = await import('../../cloud/aws/pricing.js');
  const pricing: PricingApi = {
    getProducts: (input) =>
      named(() => deps.pricing.getProducts(input), {
        call: `Pricing GetProducts (the Price List API in ${PRICING_API_REGION}, for ${options.region}'s prices)`,
        service: 'PRICING',
      }),
  };
  const ec2: Pick<Ec2Api, 'describeInstanceTypes'> = {
    describeInstanceTypes: (input) =>
      named(() => deps.ec2.describeInstanceTypes(input), {
        call: `EC2 DescribeInstanceTypes in ${options.region}`,
        service: 'EC2',
      }),
  };
  const spotPrices: SpotPriceApi | undefined =
    deps.spotPrices === undefined
      ? undefined
      : {
          describeSpotPriceHistory: (input) =>
            named(() => (deps.spotPrices as SpotPriceApi).describeSpotPriceHistory(input), {
              call: `EC2 DescribeSpotPriceHistory in ${options.region}`,
              service: 'EC2',
            }),
        };
  const { catalog, warnings } = await refreshCatalog({
    pricing,
    ec2,
    region: options.region,
    base,
    ...(options.families === undefined
      ? { familiesSource: `the families of ${options.base} (give --families to choose others)` }
      : { families: options.families, familiesSource: '--families' }),
  });
  for (const warning of warnings) deps.stderr(`warning: ${warning}\n`);
  const source =
    `AWS Price List API (GetProducts: on-demand, Linux, shared tenancy) and EC2 DescribeInstanceTypes for ` +
    `${options.region}, refreshed ${deps.now().toISOString()}; launch delays ` +
    `${catalog.crossZonePricePerGiB === undefined ? '' : 'and the cross-zone traffic price '}kept from ${options.base} ` +
    `(new types get their family's median).`;
  const spot =
    options.spot && spotPrices !== undefined
      ? await refreshSpot(spotPrices, catalog, base.spot, options, deps)
      : undefined;
  const refreshed: Catalog = spot === undefined ? catalog : { ...catalog, spot };
  const file = catalogToFile(refreshed, source);
  parseCatalog(file, 'refreshed catalog'); // what we write must load again
  const text = `${JSON.stringify(file, null, 2)}\n`;
  if (options.out === undefined) {
    deps.stdout(text);
  } else {
    // Whole or not at all: a failed refresh never leaves a half-written catalog behind.
    writeFilesAtomically([{ path: options.out, text, flag: '--out' }]);
    deps.stderr(`wrote ${catalog.types.length} instance types for ${options.region} to ${options.out}\n`);
  }
  return refreshed;
}

/** One AWS call of a refresh, as its failure names it. */
interface AwsCall {
  /** The API, the operation and the region: `EC2 DescribeInstanceTypes in eu-west-1`. */
  readonly call: string;
  /** Whose AWS_ENDPOINT_URL_<SERVICE> points the client elsewhere. */
  readonly service: 'PRICING' | 'EC2';
}

/**
 * An AWS call whose failure names the call, its region and endpoint, and what to set: the SDK's message alone ("Could
 * not load credentials from any providers", "getaddrinfo ENOTFOUND …", a JSON parse error) says none of them. A
 * ValidationError is the refresh's own word on an answer, and passes unchanged.
 */
async function named<T>(send: () => Promise<T>, call: AwsCall): Promise<T> {
  try {
    return await send();
  } catch (e) {
    if (e instanceof ValidationError) throw e;
    throw awsCallFailure(e, call);
  }
}

function awsCallFailure(e: unknown, { call, service }: AwsCall, env: NodeJS.ProcessEnv = process.env): Error {
  const endpoint = configuredEndpoint(service, env);
  const own = `AWS_ENDPOINT_URL_${service}`;
  // configuredEndpoint reads the service's own variable whenever it is set, AWS_ENDPOINT_URL only otherwise.
  const variable = env[own] === undefined ? 'AWS_ENDPOINT_URL' : own;
  const message = e instanceof Error ? e.message : String(e);
  // The SDK adds a line on where to find the raw answer in the error object: nothing a CLI user can reach.
  const firstLine = message.split('\n')[0] ?? message;
  const code = awsErrorCode(e);
  const status = awsHttpStatus(e);
  const unreadable = code === 'SyntaxError' || message.includes('Deserialization error');
  const reason = unreadable
    ? `an answer it could not read${status === undefined ? '' : ` (HTTP ${status})`}: ${firstLine}`
    : firstLine;
  const hint = failureHint(e, { service, endpoint, variable, unreadable });
  const at = endpoint === undefined ? '' : ` at ${endpoint} (${variable})`;
  return new Error(
    `catalog refresh: ${call}${at} failed: ${reason}${hint === undefined ? '' : `; ${hint}`}`,
    {
      cause: e,
    },
  );
}

function failureHint(
  e: unknown,
  where: {
    readonly service: 'PRICING' | 'EC2';
    readonly endpoint: string | undefined;
    readonly variable: string;
    readonly unreadable: boolean;
  },
): string | undefined {
  const { service, endpoint, variable } = where;
  const kind = awsFailureKind(e);
  if (kind === 'no-credentials')
    return 'give AWS credentials (AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or an instance role)';
  if (kind === 'refused')
    return (
      'AWS refused the credentials or the call: a refresh needs pricing:GetProducts, ec2:DescribeInstanceTypes ' +
      'and ec2:DescribeSpotPriceHistory (infra/iam-policy.json grants them)'
    );
  if (kind === 'unreachable')
    return endpoint === undefined
      ? 'AWS did not answer: check the network'
      : `nothing answered at ${endpoint}: check ${variable}`;
  if (!where.unreadable || endpoint === undefined) return undefined;
  if (service === 'EC2') return `the answer is not EC2's: point ${variable} at an EC2 endpoint`;
  // moto_server, the usual stand-in for EC2, serves no Price List API.
  return variable === 'AWS_ENDPOINT_URL'
    ? "the answer is not the Price List API's (moto_server, for one, has none): set AWS_ENDPOINT_URL_EC2 " +
        'instead of AWS_ENDPOINT_URL, so that only EC2 calls go there and prices come from AWS'
    : "the answer is not the Price List API's (moto_server, for one, has none): point AWS_ENDPOINT_URL_PRICING " +
        'at an endpoint that serves it, or unset it to ask AWS';
}

/**
 * The catalog's spot market: every pool's current price from DescribeSpotPriceHistory, with the base catalog's
 * interruption classes (spot-prices.ts). Types EC2 has no spot price for are left out of it (not offered as spot).
 * Undefined, with a warning, when no pool is left: a section without offerings would read as a spot market.
 */
async function refreshSpot(
  api: SpotPriceApi,
  catalog: Catalog,
  baseMarket: SpotMarket | undefined,
  options: { readonly base: string; readonly region: string },
  deps: Pick<CatalogRefreshDeps, 'now' | 'stderr'>,
): Promise<SpotMarket | undefined> {
  const { fetchSpotPrices, spotMarketFromPrices, spotPricesAtMostOnDemand, UNKNOWN_POOL_CLASS } =
    await import('../../cloud/aws/spot-prices.js');
  const now = deps.now();
  const names = catalog.types.map((t) => t.name);
  const { kept: atMostOnDemand, aboveOnDemand } = spotPricesAtMostOnDemand(
    await fetchSpotPrices(api, names, now),
    new Map(catalog.types.map((t) => [t.name, t.costPerHour])),
  );
  // A price under a catalog's least one could not be written (the file would not load): no EC2 pool costs so little.
  const prices = atMostOnDemand.filter((p) => isPricePerHour(p.pricePerHour));
  const underMinimum = atMostOnDemand.length - prices.length;
  const { market, unclassified } = spotMarketFromPrices(prices, baseMarket, {
    date: now,
    source:
      `EC2 DescribeSpotPriceHistory (Linux/UNIX) for ${options.region}, ${now.toISOString()}; interruption ` +
      `classes (Spot Instance Advisor) from ${options.base}, ${UNKNOWN_POOL_CLASS} where it has none`,
  });
  const priced = new Set(prices.map((p) => p.typeName));
  const unpriced = names.filter((n) => !priced.has(n));
  deps.stderr(
    `spot: ${prices.length} pools of ${priced.size} types` +
      (unpriced.length === 0 ? '' : `; no spot price for ${unpriced.join(', ')}`) +
      (aboveOnDemand === 0
        ? ''
        : `; ${aboveOnDemand} pools priced above their on-demand price left out (EC2 sells spot at most at it)`) +
      (underMinimum === 0
        ? ''
        : `; ${underMinimum} pools priced under $${MIN_COST_PER_HOUR}/h left out (a catalog holds no such price)`) +
      (unclassified === 0
        ? ''
        : `; ${unclassified} pools without a class in the base catalog get ${UNKNOWN_POOL_CLASS}`) +
      '\n',
  );
  if (market.offerings.length > 0) return market;
  deps.stderr(
    'warning: no spot pool is left, so the catalog has no spot section (it offers no spot instances)\n',
  );
  return undefined;
}

/** The real Pricing and EC2 clients, from the SDK's standard configuration; or the recorded fixtures (test hook). */
async function defaultDeps(region: string): Promise<CatalogRefreshDeps> {
  const { createEc2Client, ec2ApiFromClient } = await import('../../cloud/aws/ec2-api.js');
  const { createPricingClient, pricingApiFromClient } = await import('../../cloud/aws/pricing-client.js');
  const { spotPriceApiFromClient } = await import('../../cloud/aws/spot-prices.js');
  const client = createEc2Client({ region });
  const fixtureDir = process.env[PRICING_FIXTURE_DIR_ENV];
  return {
    pricing:
      fixtureDir === undefined || fixtureDir === ''
        ? pricingApiFromClient(createPricingClient())
        : fixturePricingApi(fixtureDir),
    ec2: ec2ApiFromClient(client),
    spotPrices: spotPriceApiFromClient(client),
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
      'build a catalog from the AWS Price List API (on-demand Linux prices), EC2 DescribeInstanceTypes and ' +
        'DescribeSpotPriceHistory (spot prices per zone), keeping the launch delays and spot interruption classes ' +
        'of the base catalog',
    )
    .requiredOption('--region <region>', 'EC2 region whose prices and types to fetch, e.g. us-east-1')
    .option(
      '--families <list>',
      "comma-separated instance families (default: the base catalog's, e.g. p3,c7i,r7i)",
    )
    .option('--out <file>', 'write the catalog here instead of standard output')
    .option('--no-spot', 'leave out the spot section (prices from DescribeSpotPriceHistory)')
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
