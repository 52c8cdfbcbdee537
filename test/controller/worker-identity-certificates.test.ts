import { createHash, X509Certificate } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/core/validation.js';
import {
  BUNDLED_IDENTITY_CERTIFICATES_DIR,
  identityVerifierFor,
} from '../../src/controller/worker-identity/identity-certificates.js';
import { identityDocument, makeIdentitySigner } from '../helpers/identity-signer.js';

/**
 * The certificates instance identity documents are verified against: the bundled AWS RSA-2048 certificates (one per
 * region, each AWS's self-signed certificate with a 2048-bit key; us-east-1's fingerprint as AWS publishes it), and
 * an operator's file (one or several certificates), with configuration errors naming the setting.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-identity-certs-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('instance identity certificates', () => {
  it('bundles a self-signed RSA-2048 certificate of Amazon Web Services for each region', () => {
    const files = readdirSync(BUNDLED_IDENTITY_CERTIFICATES_DIR).filter((f) => f.endsWith('.pem'));
    expect(files.length).toBeGreaterThanOrEqual(30);
    expect(files).toEqual(expect.arrayContaining(['us-east-1.pem', 'us-west-2.pem', 'eu-west-1.pem']));
    for (const file of files) {
      expect(file).toMatch(/^[a-z]{2,4}(-[a-z]+)+-\d+\.pem$/);
      const certificate = new X509Certificate(readFileSync(join(BUNDLED_IDENTITY_CERTIFICATES_DIR, file)));
      expect(certificate.subject, file).toMatch(/O=Amazon Web Services LLC/);
      expect(certificate.verify(certificate.publicKey), `${file} is self-signed`).toBe(true);
      expect(certificate.publicKey.asymmetricKeyDetails?.modulusLength, file).toBe(2048);
      expect(new Date(certificate.validTo).getUTCFullYear(), file).toBeGreaterThan(2190);
    }
    const usEast1 = new X509Certificate(
      readFileSync(join(BUNDLED_IDENTITY_CERTIFICATES_DIR, 'us-east-1.pem')),
    );
    expect(createHash('sha256').update(usEast1.raw).digest('hex')).toBe(
      '70923c22dd074172d0e5d27ea1ca865412525fccd8bc2cd0ff40660e275f0b30',
    );
    expect(identityVerifierFor('us-east-1').source).toMatch(/us-east-1\.pem$/);
  });

  it('refuses a region without a bundled certificate and a file without one, naming the setting', () => {
    const refusal = (f: () => unknown): string => {
      try {
        f();
      } catch (e) {
        expect(e).toBeInstanceOf(ValidationError);
        return `${(e as ValidationError).source}: ${(e as ValidationError).problems.join('; ')}`;
      }
      throw new Error('not refused');
    };
    expect(refusal(() => identityVerifierFor('xx-nowhere-9'))).toMatch(
      /--identity-certificate.*no bundled AWS instance identity certificate for region xx-nowhere-9/,
    );
    const empty = join(scratch, 'empty.pem');
    writeFileSync(empty, 'not a certificate\n');
    expect(refusal(() => identityVerifierFor('us-east-1', empty))).toMatch(/no PEM certificate in it/);
    expect(refusal(() => identityVerifierFor('us-east-1', join(scratch, 'missing.pem')))).toMatch(/ENOENT/);
  });

  it("verifies with any certificate of the operator's file, and only with those", async () => {
    const old = makeIdentitySigner('0x01');
    const current = makeIdentitySigner('0x02');
    const stranger = makeIdentitySigner('0x03');
    try {
      const file = join(scratch, 'rotated.pem');
      writeFileSync(file, `${old.certificatePem}${current.certificatePem}`);
      const verifier = identityVerifierFor('us-east-1', file);
      const document = identityDocument({
        instanceId: 'i-0123456789abcdef0',
        imageId: 'ami-12c6146b',
        instanceType: 'c7i.large',
        availabilityZone: 'us-east-1a',
      });
      for (const signer of [old, current])
        expect((await verifier.verify(document, signer.sign(document))).instanceId).toBe(
          'i-0123456789abcdef0',
        );
      await expect(verifier.verify(document, stranger.sign(document))).rejects.toThrow(/does not verify/);
      await expect(verifier.verify(document, 'bm90IGEgc2lnbmF0dXJl')).rejects.toThrow(
        /not a PKCS #7 SignedData/,
      );
      // The bundled AWS certificate trusts none of the test keys.
      await expect(identityVerifierFor('us-east-1').verify(document, current.sign(document))).rejects.toThrow(
        /does not verify/,
      );
    } finally {
      for (const s of [old, current, stranger]) s.dispose();
    }
  });
});
