import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ValidationError } from '../../core/validation.js';
import { PROJECT_ROOT } from '../../cloud/catalog-file.js';
import { Ec2IdentityVerifier, IdentityDocumentError, parseCertificates } from './ec2-identity-document.js';

/**
 * AWS's RSA-2048 certificates for instance identity documents, one PEM file per region, bundled in
 * infra/aws-identity-certificates/ (its README says where they come from); an operator's file replaces them.
 */
export const BUNDLED_IDENTITY_CERTIFICATES_DIR = join(PROJECT_ROOT, 'infra', 'aws-identity-certificates');

export function bundledIdentityCertificatePath(region: string): string {
  return join(BUNDLED_IDENTITY_CERTIFICATES_DIR, `${region}.pem`);
}

/**
 * The verifier for the region's documents: from `path` (one or more PEM certificates) when given, else the bundled
 * certificate of the region. A region without one, or a file that holds no certificate, is a configuration error
 * naming the setting that fixes it.
 */
export function identityVerifierFor(region: string, path?: string): Ec2IdentityVerifier {
  const file = path ?? bundledIdentityCertificatePath(region);
  const setting = '--identity-certificate (ec2.worker.identityCertificate)';
  if (path === undefined && !existsSync(file))
    throw new ValidationError(setting, [
      `no bundled AWS instance identity certificate for region ${region}: give the RSA-2048 certificate of the ` +
        `region (AWS's "regions-certs" page) with ${setting}`,
    ]);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ValidationError(setting, [`${file}: ${(e as Error).message}`]);
  }
  try {
    return new Ec2IdentityVerifier(parseCertificates(text, file), file);
  } catch (e) {
    if (e instanceof IdentityDocumentError) throw new ValidationError(setting, [e.message]);
    throw e;
  }
}
