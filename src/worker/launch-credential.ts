import type { WorkerIdentity } from '../protocol/worker-protocol.js';

/**
 * What a worker presents the first time it registers its instance (ARCHITECTURE.md "Worker identity"): the bearer
 * and the `identity` of the registration request.
 *
 * - Local mode: the one-time secret the controller handed the worker at spawn (FLEETWISE_LAUNCH_SECRET).
 * - EC2: the cluster's worker token (user data) plus the instance identity document and its RSA-2048 PKCS #7
 *   signature, read from the instance metadata service with IMDSv2 (a session token first, as the instance is launched
 *   with HttpTokens=required). The metadata service's address is configurable so tests can serve one over HTTP.
 */

export interface RegistrationCredential {
  readonly bearer: string;
  readonly identity: WorkerIdentity;
}

export type LaunchCredentialSource = () => Promise<RegistrationCredential>;

export const DEFAULT_IMDS_URL = 'http://169.254.169.254';
export const IMDS_URL_ENV = 'FLEETWISE_IMDS_URL';

export class MetadataServiceError extends Error {
  override name = 'MetadataServiceError';
}

export function launchSecretCredential(secret: string): LaunchCredentialSource {
  return () => Promise.resolve({ bearer: secret, identity: { kind: 'launch-secret' } });
}

export interface Ec2IdentityOptions {
  /** The cluster's worker token, from the user data. */
  readonly clusterToken: string;
  /** The metadata service (default http://169.254.169.254). */
  readonly imdsUrl?: string;
  readonly timeoutMs?: number;
}

export function ec2IdentityCredential(options: Ec2IdentityOptions): LaunchCredentialSource {
  const base = (options.imdsUrl ?? DEFAULT_IMDS_URL).replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? 5000;
  const call = async (
    method: 'PUT' | 'GET',
    path: string,
    headers: Record<string, string>,
  ): Promise<string> => {
    let response: Response;
    try {
      response = await fetch(`${base}${path}`, { method, headers, signal: AbortSignal.timeout(timeoutMs) });
    } catch (e) {
      throw new MetadataServiceError(
        `cannot reach the instance metadata service at ${base}: ${(e as Error).message}`,
      );
    }
    const text = await response.text();
    if (!response.ok)
      throw new MetadataServiceError(
        `${method} ${base}${path}: HTTP ${response.status}: ${text.slice(0, 200)}`,
      );
    return text;
  };
  return async () => {
    const session = await call('PUT', '/latest/api/token', { 'X-aws-ec2-metadata-token-ttl-seconds': '60' });
    const headers = { 'X-aws-ec2-metadata-token': session };
    const document = await call('GET', '/latest/dynamic/instance-identity/document', headers);
    const rsa2048 = await call('GET', '/latest/dynamic/instance-identity/rsa2048', headers);
    return {
      bearer: options.clusterToken,
      identity: { kind: 'ec2-instance-identity', document, rsa2048: rsa2048.trim() },
    };
  };
}
