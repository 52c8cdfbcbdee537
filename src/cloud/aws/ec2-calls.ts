import { CloudProviderError } from '../provider.js';
import { awsErrorCode } from './client-config.js';
import type { Ec2Api } from './ec2-api.js';

/** How the EC2 provider's parts reach EC2: the API, each call made through the provider's throttling retry. */
export interface Ec2Calls {
  readonly api: Ec2Api;
  call<T>(operation: string, fn: () => Promise<T>): Promise<T>;
}

/** A failed EC2 call as the CloudProviderError callers handle, naming the operation and keeping EC2's code. */
export function asProviderError(error: unknown, operation: string): Error {
  if (error instanceof CloudProviderError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new CloudProviderError(`${operation} failed: ${message}`, awsErrorCode(error), { cause: error });
}
