import { describe, expect, it } from 'vitest';
import {
  launchRefusalKind,
  launchRetryDelaySeconds,
  type LaunchRefusalKind,
} from '../../src/cloud/launch-refusal-kinds.js';
import {
  CloudProviderError,
  InsufficientCapacityError,
  QuotaExceededError,
  ThrottlingError,
} from '../../src/cloud/provider.js';

/** Which launch failures a retry cannot change until an operator acts, and how long each waits before the next try. */

describe('launchRefusalKind', () => {
  const table: readonly [string | undefined, LaunchRefusalKind][] = [
    // What the launch names does not exist.
    ['InvalidGroup.NotFound', 'permanent'],
    ['InvalidGroupId.Malformed', 'permanent'],
    ['InvalidSubnetID.NotFound', 'permanent'],
    ['InvalidKeyPair.NotFound', 'permanent'],
    ['InvalidAMIID.NotFound', 'permanent'],
    ['InvalidAMIID.Malformed', 'permanent'],
    ['InvalidAMIID.Unavailable', 'permanent'],
    // What it asks for is not taken (an instance profile EC2 does not know yet is InvalidParameterValue).
    ['InvalidParameterValue', 'permanent'],
    ['InvalidParameterCombination', 'permanent'],
    ['InvalidParameter', 'permanent'],
    ['MissingParameter', 'permanent'],
    // Not allowed: a missing iam:PassRole, an account blocked or not opted in to the region.
    ['UnauthorizedOperation', 'permanent'],
    ['Blocked', 'permanent'],
    ['OptInRequired', 'permanent'],
    // Passes by itself.
    ['RequestLimitExceeded', 'transient'],
    ['InternalError', 'transient'],
    ['ServiceUnavailable', 'transient'],
    ['Unavailable', 'transient'],
    ['PendingVerification', 'transient'],
    ['IdempotentParameterMismatch', 'transient'],
    ['SomethingNew', 'transient'],
    [undefined, 'transient'],
  ];

  it.each(table)('%s is %s', (code, kind) => {
    expect(launchRefusalKind(new CloudProviderError(`RunInstances failed (${code ?? '-'})`, code))).toBe(
      kind,
    );
  });

  it('only the code counts, not its case or a look-alike', () => {
    expect(launchRefusalKind(new CloudProviderError('x', 'invalidgroup.notfound'))).toBe('transient');
    expect(launchRefusalKind(new CloudProviderError('x', 'InvalidGroup.NotFoundish'))).toBe('transient');
  });

  it('an error that is no cloud refusal (a network failure, a bug) is transient', () => {
    expect(launchRefusalKind(new Error('connect ECONNREFUSED 127.0.0.1:443'))).toBe('transient');
    expect(launchRefusalKind('InvalidGroup.NotFound')).toBe('transient');
    expect(launchRefusalKind(undefined)).toBe('transient');
  });

  it('the provider’s own error classes read by their code', () => {
    expect(launchRefusalKind(new ThrottlingError('RunInstances', 5, 'RequestLimitExceeded'))).toBe(
      'transient',
    );
    expect(launchRefusalKind(new InsufficientCapacityError('c7i.large', ['us-east-1a'], []))).toBe(
      'transient',
    );
    expect(launchRefusalKind(new QuotaExceededError('c7i.large', 'VcpuLimitExceeded'))).toBe('transient');
  });
});

describe('launchRetryDelaySeconds', () => {
  it('a transient failure doubles from the base up to the max', () => {
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => launchRetryDelaySeconds(n, 'transient', 10, 300))).toEqual([
      10, 20, 40, 80, 160, 300, 300,
    ]);
  });

  it('a permanent refusal waits the max from its first attempt', () => {
    expect([1, 2, 9].map((n) => launchRetryDelaySeconds(n, 'permanent', 10, 300))).toEqual([300, 300, 300]);
  });
});
