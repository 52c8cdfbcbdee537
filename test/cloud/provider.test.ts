import { describe, expect, it } from 'vitest';
import { parseWith } from '../../src/core/validation.js';
import { InsufficientCapacityError, launchRequestSchema } from '../../src/cloud/provider.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import type { Ec2Api } from '../../src/cloud/aws/ec2-api.js';

const base = {
  typeName: 'c7i.large',
  idempotencyToken: 'tok-1',
  clusterName: 'alpha',
  planId: 'plan-1',
  instanceKey: 'slot-1',
};

describe('launch requests', () => {
  it('default to one instance on demand, no zone preference and no extra tags', () => {
    expect(parseWith(launchRequestSchema, base, 'launch request')).toEqual({
      ...base,
      count: 1,
      availabilityZones: [],
      tags: {},
      market: 'on-demand',
      onDemandFallback: true,
    });
  });

  it.each([
    [{ count: 2 }, /count/],
    [{ idempotencyToken: 'x'.repeat(65) }, /idempotencyToken/],
    [{ idempotencyToken: 'has space' }, /idempotencyToken/],
    [{ typeName: 'C7I LARGE' }, /typeName/],
    [{ clusterName: '' }, /clusterName/],
    [{ tags: { 'fleetwise:plan': 'spoof' } }, /reserved/],
    [{ onDemandFallback: 'no' }, /onDemandFallback/],
  ])('rejects %j', (override, reason) => {
    expect(() => parseWith(launchRequestSchema, { ...base, ...override }, 'launch request')).toThrow(reason);
  });
});

describe('InsufficientCapacityError', () => {
  it('says where the type was refused', () => {
    const e = new InsufficientCapacityError('p3.8xlarge', ['us-east-1a'], ['us-east-1b']);
    expect(e.message).toBe(
      'insufficient capacity for p3.8xlarge: refused in us-east-1a; recently refused in us-east-1b',
    );
    expect(e.code).toBe('InsufficientInstanceCapacity');
  });
});

describe('Ec2Provider configuration', () => {
  const api = {} as Ec2Api;
  const valid = {
    region: 'us-east-1',
    amiId: 'ami-12c6146b',
    placements: [{ availabilityZone: 'us-east-1a' }],
  };

  it.each([
    [{ amiId: 'ubuntu' }, /amiId: an AMI id/],
    [{ placements: [] }, /placements: at least one availability zone/],
    [
      { placements: [{ availabilityZone: 'us-east-1a' }, { availabilityZone: 'us-east-1a' }] },
      /each availability zone may appear once/,
    ],
    [{ placements: [{ availabilityZone: 'us-east-1a', subnetId: 'sub-1' }] }, /placements\.0\.subnetId/],
    [{ securityGroupIds: ['default'] }, /securityGroupIds\.0/],
    [{ listPageSize: 2 }, /listPageSize/],
    [{ amiID: 'ami-12c6146b' }, /amiID/], // typos are errors, not silently ignored
  ])('rejects %j, naming the field', (override, reason) => {
    expect(() => new Ec2Provider({ ...valid, ...override } as typeof valid, { api })).toThrow(reason);
  });
});
