import { z } from 'zod';
import { DEFAULT_CAPACITY_ERROR_TTL_SECONDS } from './capacity-error-cache.js';
import { backoffPolicySchema } from './throttling.js';
import { workerBootstrapSchema } from './user-data.js';

/** The EC2 provider's configuration: the region, the worker AMI, where instances go and how they start. */
export const ec2ProviderConfigSchema = z
  .object({
    region: z.string().min(1),
    /** The worker AMI (for GPU types: one with the NVIDIA driver and container toolkit). */
    amiId: z.string().regex(/^ami-[0-9a-f]{8,17}$/, 'an AMI id like ami-0123456789abcdef0'),
    /** One entry per availability zone the cluster may use, in default preference order; subnets pin the VPC. */
    placements: z
      .array(
        z.object({
          availabilityZone: z.string().min(1),
          subnetId: z
            .string()
            .regex(/^subnet-[0-9a-f]{8,17}$/, 'a subnet id like subnet-0123456789abcdef0')
            .optional(),
        }),
      )
      .min(1, 'at least one availability zone')
      .refine(
        (ps) => new Set(ps.map((p) => p.availabilityZone)).size === ps.length,
        'each availability zone may appear once',
      ),
    securityGroupIds: z
      .array(z.string().regex(/^sg-[0-9a-f]{8,17}$/, 'a security group id like sg-0123…'))
      .default([]),
    /** Instance profile name or ARN: the workers' role (S3 access to the checkpoint bucket). */
    instanceProfile: z.string().min(1).optional(),
    keyName: z.string().min(1).optional(),
    /** How new instances start a worker; leave out when the AMI starts one itself. */
    worker: workerBootstrapSchema.optional(),
    capacityErrorTtlSeconds: z.number().nonnegative().default(DEFAULT_CAPACITY_ERROR_TTL_SECONDS),
    throttling: backoffPolicySchema.default(backoffPolicySchema.parse({})),
    /** DescribeInstances page size (EC2 allows 5–1000). */
    listPageSize: z.number().int().min(5).max(1000).default(1000),
  })
  .strict();
export type Ec2ProviderConfig = z.input<typeof ec2ProviderConfigSchema>;
/** The configuration with its defaults filled in, as the provider's parts read it. */
export type ParsedEc2ProviderConfig = z.output<typeof ec2ProviderConfigSchema>;
export type ConfiguredPlacement = ParsedEc2ProviderConfig['placements'][number];
