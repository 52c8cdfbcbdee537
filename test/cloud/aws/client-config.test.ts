import { describe, expect, it } from 'vitest';
import {
  awsErrorCode,
  commonClientConfig,
  configuredEndpoint,
} from '../../../src/cloud/aws/client-config.js';
import { createEc2Client } from '../../../src/cloud/aws/ec2-api.js';
import { createPricingClient } from '../../../src/cloud/aws/pricing-client.js';

describe('AWS endpoint configuration', () => {
  it('prefers AWS_ENDPOINT_URL_<SERVICE> over AWS_ENDPOINT_URL', () => {
    const env = { AWS_ENDPOINT_URL: 'http://all:1', AWS_ENDPOINT_URL_EC2: 'http://ec2:2' };
    expect(configuredEndpoint('EC2', env)).toBe('http://ec2:2');
    expect(configuredEndpoint('S3', env)).toBe('http://all:1');
    expect(configuredEndpoint('PRICING', {})).toBeUndefined();
  });

  it('ignores both when AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true, and blank values', () => {
    expect(
      configuredEndpoint('EC2', {
        AWS_ENDPOINT_URL: 'http://x:1',
        AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'TRUE',
      }),
    ).toBeUndefined();
    expect(configuredEndpoint('EC2', { AWS_ENDPOINT_URL: '  ' })).toBeUndefined();
  });

  it('lets an explicit endpoint win and passes only the settings given', () => {
    expect(
      commonClientConfig('EC2', { endpoint: 'http://explicit:3' }, { AWS_ENDPOINT_URL: 'http://env:1' }),
    ).toEqual({
      endpoint: 'http://explicit:3',
    });
    expect(commonClientConfig('EC2', { region: 'eu-west-1', maxAttempts: 1 }, {})).toEqual({
      region: 'eu-west-1',
      maxAttempts: 1,
    });
  });

  it('builds EC2 clients on the EC2 endpoint and Pricing clients in us-east-1', async () => {
    const ec2 = createEc2Client({ region: 'eu-west-1' }, { AWS_ENDPOINT_URL_EC2: 'http://ec2-local:4566' });
    expect((await ec2.config.endpoint?.())?.hostname).toBe('ec2-local');
    expect(await ec2.config.region()).toBe('eu-west-1');
    const pricing = createPricingClient({}, {});
    expect(await pricing.config.region()).toBe('us-east-1');
  });

  it('reads error codes from name or Code', () => {
    expect(awsErrorCode(Object.assign(new Error('x'), { name: 'RequestLimitExceeded' }))).toBe(
      'RequestLimitExceeded',
    );
    expect(awsErrorCode({ Code: 'InvalidInstanceID.NotFound', name: 'Error' })).toBe(
      'InvalidInstanceID.NotFound',
    );
    expect(awsErrorCode(undefined)).toBeUndefined();
  });
});
