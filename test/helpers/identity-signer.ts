import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A stand-in for AWS's instance identity signing key, made with the openssl command line (an implementation
 * independent of the verifier under test): a self-signed RSA-2048 certificate like AWS's per-region ones, and
 * `openssl cms -sign` producing what IMDS serves at /latest/dynamic/instance-identity/rsa2048 (a PKCS #7 SignedData
 * carrying the document, base64, without PEM armour). A test that cannot find openssl fails naming it.
 */

export const OPENSSL = process.env.OPENSSL_BIN ?? 'openssl';

function openssl(args: readonly string[], input?: string): string {
  try {
    return execFileSync(OPENSSL, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT')
      throw new Error(
        `openssl not found (${OPENSSL}): the instance identity tests sign documents with it (apt-get install openssl)`,
      );
    throw e;
  }
}

export interface IdentitySigner {
  /** The certificate, PEM: what the controller is configured to trust. */
  readonly certificatePem: string;
  readonly certificatePath: string;
  /** The rsa2048 body for `document`, signed with this signer's key. */
  sign(document: string): string;
  dispose(): void;
}

/**
 * A key and self-signed certificate. Two signers made with the same `serial` share the certificate's issuer and serial
 * number (what a PKCS #7 signer is identified by) but not the key: one forges the other's signatures.
 */
export function makeIdentitySigner(serial = '0x0fa1cbeef0'): IdentitySigner {
  const dir = mkdtempSync(join(tmpdir(), 'fleetwise-identity-signer-'));
  const key = join(dir, 'key.pem');
  const certificatePath = join(dir, 'cert.pem');
  openssl([
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    key,
    '-out',
    certificatePath,
    '-days',
    '2',
    '-set_serial',
    serial,
    '-subj',
    '/C=US/ST=Washington State/L=Seattle/O=Test Web Services LLC',
  ]);
  return {
    certificatePem: readFileSync(certificatePath, 'utf8'),
    certificatePath,
    sign(document: string): string {
      const input = join(dir, `doc-${Math.random().toString(36).slice(2)}.json`);
      writeFileSync(input, document);
      const pem = openssl([
        'cms',
        '-sign',
        '-in',
        input,
        '-signer',
        certificatePath,
        '-inkey',
        key,
        '-outform',
        'PEM',
        '-nodetach',
        '-binary',
        '-nocerts',
        '-md',
        'sha256',
      ]);
      return pem.replace(/-----[^-]+-----/g, '').trim();
    },
    dispose(): void {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface IdentityFields {
  readonly instanceId: string;
  readonly imageId: string;
  readonly instanceType: string;
  readonly availabilityZone: string;
  readonly region?: string;
  readonly accountId?: string;
}

/** A document laid out as IMDS serves one (pretty-printed JSON, every field AWS sends). */
export function identityDocument(fields: IdentityFields): string {
  const document = {
    accountId: fields.accountId ?? '123456789012',
    architecture: 'x86_64',
    availabilityZone: fields.availabilityZone,
    billingProducts: null,
    devpayProductCodes: null,
    marketplaceProductCodes: null,
    imageId: fields.imageId,
    instanceId: fields.instanceId,
    instanceType: fields.instanceType,
    kernelId: null,
    pendingTime: '2026-01-01T00:00:00Z',
    privateIp: '10.0.0.7',
    ramdiskId: null,
    region: fields.region ?? 'us-east-1',
    version: '2017-09-30',
  };
  return JSON.stringify(document, null, 2).replace(/": /g, '" : ');
}
