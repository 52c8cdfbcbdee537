import type { EC2Client } from '@aws-sdk/client-ec2';
import { configuredEndpoint } from '../cloud/aws/client-config.js';
import { awsFailureKind } from '../cloud/aws/failure-kind.js';
import type { Ec2ProviderConfig } from '../cloud/aws/ec2-provider-config.js';
import type { ControllerConfig } from '../controller/config.js';
import { ValidationError } from '../core/validation.js';

/**
 * The EC2 provider's settings from the configuration, with what it left out (the AMI, the placements) looked up in
 * the account (src/cloud/aws/discovery.ts).
 */
export async function resolveEc2Settings(
  config: ControllerConfig,
  client: EC2Client,
  workerToken: string | undefined,
): Promise<Ec2ProviderConfig> {
  const ec2 = config.ec2;
  const { discoverEc2Settings } = await import('../cloud/aws/discovery.js');
  const { amiId, placements } = await discoverEc2Settings(client, {
    region: config.region,
    amiId: ec2.amiId,
    placements: ec2.placements,
    subnetIds: ec2.subnetIds,
  }).catch((e: unknown) => {
    // A setting EC2 refused is named by the discovery itself; any other failure is the account's or the network's.
    if (e instanceof ValidationError) throw e;
    throw discoveryFailure(e, config);
  });
  return {
    region: config.region,
    amiId,
    placements,
    securityGroupIds: [...ec2.securityGroupIds],
    ...(ec2.instanceProfile === undefined ? {} : { instanceProfile: ec2.instanceProfile }),
    ...(ec2.keyName === undefined ? {} : { keyName: ec2.keyName }),
    ...(ec2.capacityErrorTtlSeconds === undefined
      ? {}
      : { capacityErrorTtlSeconds: ec2.capacityErrorTtlSeconds }),
    ...(ec2.worker === undefined || workerToken === undefined
      ? {}
      : {
          worker: {
            controllerUrl: ec2.worker.controllerUrl,
            workerToken,
            ...(ec2.worker.packageSpec === undefined ? {} : { packageSpec: ec2.worker.packageSpec }),
            ...(ec2.worker.nodeVersion === undefined ? {} : { nodeVersion: ec2.worker.nodeVersion }),
            ...(ec2.worker.templatePath === undefined ? {} : { templatePath: ec2.worker.templatePath }),
          },
        }),
  };
}

/**
 * A discovery that failed for want of credentials or of an answer: the SDK's message alone ("Could not load
 * credentials from any providers", "connect ECONNREFUSED …") says neither what the controller was doing nor what to
 * set. Not `--ami` or `--subnets`: they are checked against EC2 too, and only a dry run starts without EC2.
 */
function discoveryFailure(e: unknown, config: ControllerConfig): Error {
  const { ec2, region } = config;
  const ami = ec2.amiId === undefined ? 'the newest Amazon Linux 2023 AMI' : `AMI ${ec2.amiId}`;
  const where =
    ec2.subnetIds !== undefined
      ? `the zones of subnets ${ec2.subnetIds.join(', ')}`
      : ec2.placements !== undefined
        ? "the placements' zones and subnets"
        : "the region's availability zones";
  const reason = e instanceof Error ? e.message : String(e);
  const hint = discoveryHint(e, region);
  return new Error(
    `EC2 discovery in ${region} (${ami}; ${where}) failed: ${reason}${hint === undefined ? '' : `; ${hint}`}`,
    { cause: e },
  );
}

function discoveryHint(e: unknown, region: string): string | undefined {
  switch (awsFailureKind(e)) {
    case 'no-credentials':
      return (
        'give AWS credentials (AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or an instance role), ' +
        'or --dry-run to plan without cloud calls'
      );
    case 'refused':
      return 'EC2 refused the credentials or the call: the controller needs the permissions of infra/iam-policy.json';
    case 'unreachable': {
      const endpoint = configuredEndpoint('EC2');
      return endpoint === undefined
        ? `EC2 in ${region} did not answer: check the network`
        : `nothing answered at the EC2 endpoint ${endpoint} (AWS_ENDPOINT_URL_EC2, else AWS_ENDPOINT_URL): check it`;
    }
    case undefined:
      return undefined;
  }
}
