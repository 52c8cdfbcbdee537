import type { EC2Client } from '@aws-sdk/client-ec2';
import type { Ec2ProviderConfig } from '../cloud/aws/ec2-provider-config.js';
import type { ControllerConfig } from '../controller/config.js';

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
