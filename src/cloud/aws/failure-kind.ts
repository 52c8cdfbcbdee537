import { errnoCode } from '../../core/errno.js';
import { awsErrorCode, awsHttpStatus } from './client-config.js';

/**
 * Why an AWS call failed, as far as a hint to the user goes: the SDK's message alone ("Could not load credentials from
 * any providers", "connect ECONNREFUSED …") says neither which call it was nor what to set, so callers name the call
 * and add what to do for each kind.
 */
export type AwsFailureKind = 'no-credentials' | 'refused' | 'unreachable';

/** What the SDK's credential chain throws when no source gives credentials (or an SSO token). */
const NO_CREDENTIALS_ERRORS: ReadonlySet<string> = new Set([
  'CredentialsProviderError',
  'TokenProviderError',
]);

/** What AWS answers credentials it does not take, or calls they may not make (EC2's codes and JSON APIs' alike). */
const REFUSED_ERRORS: ReadonlySet<string> = new Set([
  'AuthFailure',
  'UnauthorizedOperation',
  'AccessDeniedException',
  'UnrecognizedClientException',
  'InvalidClientTokenId',
  'InvalidSignatureException',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'ExpiredTokenException',
  'RequestExpired',
  'OptInRequired',
]);

/** What connecting to an endpoint that is down, unknown or cut off answers; TimeoutError is the SDK's own. */
const UNREACHABLE_ERRNO: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

/** The kind of an AWS call's failure; undefined for any other (an answer the caller could not read, say). */
export function awsFailureKind(e: unknown): AwsFailureKind | undefined {
  const code = awsErrorCode(e);
  if (code !== undefined && NO_CREDENTIALS_ERRORS.has(code)) return 'no-credentials';
  const status = awsHttpStatus(e);
  if ((code !== undefined && REFUSED_ERRORS.has(code)) || status === 401 || status === 403) return 'refused';
  const errno = errnoCode(e);
  if ((errno !== undefined && UNREACHABLE_ERRNO.has(errno)) || code === 'TimeoutError') return 'unreachable';
  return undefined;
}
