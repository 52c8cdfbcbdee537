/**
 * `fleetwise catalog refresh` whose AWS calls fail says which call failed, in which region and at which endpoint, and
 * what to set, not only the SDK's bare message ("Could not load credentials from any providers", a JSON parse error
 * from an endpoint that is not the Price List API). The built CLI in a subprocess against a real moto_server (EC2,
 * but no Pricing API) and a port nothing listens on, in an environment with no AWS settings but those each case gives
 * and a home directory without ~/.aws; DescribeSpotPriceHistory in process, as only its client can be pointed
 * elsewhere.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCatalogRefresh } from '../../src/cli/commands/catalog.js';
import { createEc2Client, ec2ApiFromClient } from '../../src/cloud/aws/ec2-api.js';
import { fixturePricingApi, PRICING_FIXTURE_DIR_ENV } from '../../src/cloud/aws/pricing-fixture.js';
import { spotPriceApiFromClient } from '../../src/cloud/aws/spot-prices.js';
import { PRICING_FIXTURES } from '../cloud/aws/fixture-paths.js';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';
import { bareEnv } from '../helpers/local-controller.js';
import { describeWithMoto, TEST_CREDENTIALS, TEST_REGION } from '../helpers/moto.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-refresh-aws-'));
const home = join(scratch, 'home');

beforeAll(() => {
  ensureBuiltCli();
  mkdirSync(home);
}, 240_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const DUMMY_KEYS = {
  AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
  AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
};

/** `catalog refresh --region REGION --families c7i` with no AWS settings but `aws`, one attempt per call. */
function refresh(region: string, aws: NodeJS.ProcessEnv): Promise<CliResult> {
  const env = bareEnv();
  for (const key of Object.keys(env)) if (key.startsWith('AWS_')) delete env[key];
  return runCli(['catalog', 'refresh', '--region', region, '--families', 'c7i'], {
    ...env,
    HOME: home,
    // The instance metadata service is a source of credentials too: off, so that no host's role stands in for them
    // (and the chain does not wait for it).
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_MAX_ATTEMPTS: '1',
    ...aws,
  });
}

/** The lines the CLI wrote itself (the SDK may warn about the Node version on stderr too). */
function cliLines(result: CliResult): string[] {
  return result.stderr.split('\n').filter((l) => l.startsWith('fleetwise:'));
}

const CREDENTIALS_HINT =
  'give AWS credentials (AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or an instance role)';

describeWithMoto(
  'catalog refresh names the AWS call that failed and what to set',
  (moto) => {
    it('AWS_ENDPOINT_URL at moto_server: GetProducts reads no JSON, and the EC2 variable is named', async () => {
      const result = await refresh('us-east-1', { ...DUMMY_KEYS, AWS_ENDPOINT_URL: moto.endpoint });
      expect(result.code, result.stderr).toBe(1);
      expect(result.stdout).toBe('');
      const lines = cliLines(result);
      expect(lines).toHaveLength(1);
      const line = lines[0] ?? '';
      expect(line).toMatch(
        new RegExp(
          "^fleetwise: catalog refresh: Pricing GetProducts \\(the Price List API in us-east-1, for us-east-1's " +
            `prices\\) at ${moto.endpoint} \\(AWS_ENDPOINT_URL\\) failed: ` +
            'an answer it could not read \\(HTTP \\d+\\): ' +
            '[^;]*JSON[^;]*; ',
        ),
      );
      expect(line).toContain(
        "; the answer is not the Price List API's (moto_server, for one, has none): set AWS_ENDPOINT_URL_EC2 " +
          'instead of AWS_ENDPOINT_URL, so that only EC2 calls go there and prices come from AWS',
      );
      // The SDK's pointer to a field of its error object is no use on a terminal.
      expect(result.stderr).not.toContain('$response');
    }, 60_000);

    it('no credentials: GetProducts, the first call, names the regions and where credentials come from', async () => {
      const result = await refresh('eu-west-1', {});
      expect(result.code, result.stderr).toBe(1);
      expect(cliLines(result)).toEqual([
        "fleetwise: catalog refresh: Pricing GetProducts (the Price List API in us-east-1, for eu-west-1's prices) " +
          `failed: Could not load credentials from any providers; ${CREDENTIALS_HINT}`,
      ]);
    }, 60_000);

    it('without credentials for EC2 (recorded prices): DescribeInstanceTypes is named with its region', async () => {
      const result = await refresh('eu-west-1', { [PRICING_FIXTURE_DIR_ENV]: PRICING_FIXTURES });
      expect(result.code, result.stderr).toBe(1);
      expect(cliLines(result)).toEqual([
        'fleetwise: catalog refresh: EC2 DescribeInstanceTypes in eu-west-1 failed: Could not load credentials ' +
          `from any providers; ${CREDENTIALS_HINT}`,
      ]);
    }, 60_000);

    it('a Pricing endpoint nothing answers at: names it and its variable', async () => {
      const result = await refresh('us-east-1', {
        ...DUMMY_KEYS,
        AWS_ENDPOINT_URL: moto.endpoint,
        AWS_ENDPOINT_URL_PRICING: UNREACHABLE_URL,
      });
      expect(result.code, result.stderr).toBe(1);
      const port = new URL(UNREACHABLE_URL).port;
      expect(cliLines(result)).toEqual([
        "fleetwise: catalog refresh: Pricing GetProducts (the Price List API in us-east-1, for us-east-1's prices) " +
          `at ${UNREACHABLE_URL} (AWS_ENDPOINT_URL_PRICING) failed: connect ECONNREFUSED 127.0.0.1:${port}; ` +
          `nothing answered at ${UNREACHABLE_URL}: check AWS_ENDPOINT_URL_PRICING`,
      ]);
    }, 60_000);

    it('DescribeSpotPriceHistory failing after the others answered is named, and nothing is written', async () => {
      const saved = process.env.AWS_ENDPOINT_URL_EC2;
      // The spot client alone takes its endpoint from the environment; the EC2 one is given moto's.
      process.env.AWS_ENDPOINT_URL_EC2 = UNREACHABLE_URL;
      try {
        let stdout = '';
        const failure: unknown = await runCatalogRefresh(
          { region: TEST_REGION, families: 'c7i' },
          {
            pricing: fixturePricingApi(PRICING_FIXTURES),
            ec2: ec2ApiFromClient(createEc2Client(moto.clientOptions)),
            spotPrices: spotPriceApiFromClient(
              createEc2Client({ region: TEST_REGION, credentials: TEST_CREDENTIALS, maxAttempts: 1 }),
            ),
            now: () => new Date('2026-11-24T12:00:00Z'),
            stdout: (text) => (stdout += text),
            stderr: () => undefined,
          },
        ).catch((e: unknown) => e);
        expect(failure).toBeInstanceOf(Error);
        expect((failure as Error).message).toBe(
          `catalog refresh: EC2 DescribeSpotPriceHistory in us-east-1 at ${UNREACHABLE_URL} (AWS_ENDPOINT_URL_EC2) ` +
            `failed: connect ECONNREFUSED 127.0.0.1:${new URL(UNREACHABLE_URL).port}; nothing answered at ` +
            `${UNREACHABLE_URL}: check AWS_ENDPOINT_URL_EC2`,
        );
        expect(stdout).toBe('');
      } finally {
        if (saved === undefined) delete process.env.AWS_ENDPOINT_URL_EC2;
        else process.env.AWS_ENDPOINT_URL_EC2 = saved;
      }
    }, 60_000);
  },
  { resetBeforeEach: false },
);
