import { CloudProviderError } from './provider.js';

/**
 * Whether a failed launch can succeed when simply tried again. `permanent`: the cloud refused what the launch asks for
 * (a security group, subnet, key pair or image that does not exist, a parameter it does not take, a permission the
 * controller's role lacks, an account blocked or not opted in), and it will refuse it again until an operator fixes
 * the cause. `transient`: anything else (throttling, a server error, a network failure, a code not known here).
 * Capacity and quota refusals are neither: the caller falls back to another type for those before asking.
 */
export type LaunchRefusalKind = 'permanent' | 'transient';

/**
 * EC2's codes for a launch refused for what it asks for. NotFound codes come right after a resource is created as
 * well (EC2 is eventually consistent), and an instance profile created a moment ago is refused as
 * InvalidParameterValue for a minute or two: a permanent refusal is still retried, at the longest backoff.
 */
export const PERMANENT_LAUNCH_REFUSAL_CODES: ReadonlySet<string> = new Set([
  'InvalidGroup.NotFound',
  'InvalidGroupId.Malformed',
  'InvalidSubnetID.NotFound',
  'InvalidKeyPair.NotFound',
  'InvalidAMIID.NotFound',
  'InvalidAMIID.Malformed',
  'InvalidAMIID.Unavailable',
  'InvalidParameter',
  'InvalidParameterValue',
  'InvalidParameterCombination',
  'MissingParameter',
  // A missing iam:PassRole for the instance profile, or ec2:RunInstances on one of the launch's resources.
  'UnauthorizedOperation',
  'Blocked',
  'OptInRequired',
]);

/** How a launch's failure reads: permanent only for a cloud refusal whose code says so. */
export function launchRefusalKind(error: unknown): LaunchRefusalKind {
  if (!(error instanceof CloudProviderError) || error.code === undefined) return 'transient';
  return PERMANENT_LAUNCH_REFUSAL_CODES.has(error.code) ? 'permanent' : 'transient';
}

/**
 * Seconds before the next try of a launch that failed `attempts` times, the last time for a reason of `kind`: a
 * transient failure doubles from `baseSeconds` up to `maxSeconds`; a permanent one waits `maxSeconds` at once, since
 * quicker tries would only be refused again until someone acts.
 */
export function launchRetryDelaySeconds(
  attempts: number,
  kind: LaunchRefusalKind,
  baseSeconds: number,
  maxSeconds: number,
): number {
  if (kind === 'permanent') return maxSeconds;
  return Math.min(maxSeconds, baseSeconds * 2 ** (Math.max(1, attempts) - 1));
}
