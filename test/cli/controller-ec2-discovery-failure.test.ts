import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';
import { bareEnv } from '../helpers/local-controller.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

/**
 * An EC2 controller whose start-up discovery (the worker AMI, the zones) cannot reach EC2 says what it was looking up
 * in which region and what to set, not only the SDK's bare message: without credentials, with an endpoint nothing
 * answers at, and with credentials EC2 refuses. The built CLI in a subprocess, as an operator starts it, in an
 * environment with no AWS settings but those each case gives and a home directory with no ~/.aws.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-ec2-discovery-'));
const home = join(scratch, 'home');
let refusing: Server;
let refusingUrl: string;

beforeAll(async () => {
  ensureBuiltCli();
  mkdirSync(home);
  // Answers every call as EC2 answers a key it does not know.
  refusing = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      response.writeHead(401, { 'content-type': 'text/xml' });
      response.end(
        '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>AuthFailure</Code>' +
          '<Message>AWS was not able to validate the provided access credentials</Message></Error></Errors>' +
          '<RequestID>1</RequestID></Response>',
      );
    });
  });
  await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
  refusingUrl = `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`;
}, 240_000);

afterAll(async () => {
  await new Promise((resolve) => refusing.close(resolve));
  rmSync(scratch, { recursive: true, force: true });
});

/** `fleetwise controller --provider aws` with no AWS settings but `aws`, in a state directory of its own. */
function awsController(
  name: string,
  aws: NodeJS.ProcessEnv,
  args: readonly string[] = [],
): Promise<CliResult> {
  const env = bareEnv();
  for (const key of Object.keys(env)) if (key.startsWith('AWS_')) delete env[key];
  const stateDir = join(scratch, name);
  return runCli(['controller', '--provider', 'aws', '--cluster', 'c1', '--state-dir', stateDir, ...args], {
    ...env,
    HOME: home,
    // The instance metadata service is a source of credentials too: off, so that no host's role stands in for them.
    AWS_EC2_METADATA_DISABLED: 'true',
    ...aws,
  });
}

/** The lines the CLI wrote itself (the SDK may warn about the Node version on stderr too). */
function cliLines(result: CliResult): string[] {
  return result.stderr.split('\n').filter((l) => l.startsWith('fleetwise:'));
}

const DUMMY_KEYS = { AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'secret' };

describe('an EC2 controller whose discovery fails says what it was doing and what to set', () => {
  it('without credentials: names the region, what it looked up and where credentials come from', async () => {
    const result = await awsController('no-credentials', {});
    expect(result.code, result.stderr).toBe(1);
    expect(cliLines(result)).toEqual([
      "fleetwise: EC2 discovery in us-east-1 (the newest Amazon Linux 2023 AMI; the region's availability zones) " +
        'failed: Could not load credentials from any providers; give AWS credentials (AWS_PROFILE, or ' +
        'AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or an instance role), or --dry-run to plan without cloud calls',
    ]);
  }, 60_000);

  it('with an endpoint nothing answers at: names the endpoint and the variables that set it', async () => {
    const result = await awsController('unreachable', { ...DUMMY_KEYS, AWS_ENDPOINT_URL: UNREACHABLE_URL });
    expect(result.code, result.stderr).toBe(1);
    const port = new URL(UNREACHABLE_URL).port;
    expect(cliLines(result)).toEqual([
      "fleetwise: EC2 discovery in us-east-1 (the newest Amazon Linux 2023 AMI; the region's availability zones) " +
        `failed: connect ECONNREFUSED 127.0.0.1:${port}; nothing answered at the EC2 endpoint ${UNREACHABLE_URL} ` +
        '(AWS_ENDPOINT_URL_EC2, else AWS_ENDPOINT_URL): check it',
    ]);
  }, 60_000);

  it('with credentials EC2 refuses: names the AMI and subnets given, and the policy needed', async () => {
    const result = await awsController('refused', { ...DUMMY_KEYS, AWS_ENDPOINT_URL_EC2: refusingUrl }, [
      '--ami',
      'ami-0123456789abcdef0',
      '--subnets',
      'subnet-0123456789abcdef0,subnet-0fedcba9876543210',
    ]);
    expect(result.code, result.stderr).toBe(1);
    expect(cliLines(result)).toEqual([
      'fleetwise: EC2 discovery in us-east-1 (AMI ami-0123456789abcdef0; the zones of subnets ' +
        'subnet-0123456789abcdef0, subnet-0fedcba9876543210) ' +
        'failed: AWS was not able to validate the provided access credentials; EC2 refused the credentials or the ' +
        'call: the controller needs the permissions of infra/iam-policy.json',
    ]);
  }, 60_000);
});
