import { X509Certificate } from 'node:crypto';
import { Certificate, ContentInfo, SignedData } from 'pkijs';
import { z } from 'zod';

/**
 * Verifying an EC2 instance identity document (ARCHITECTURE.md "Worker identity"): the JSON document IMDSv2 serves at
 * /latest/dynamic/instance-identity/document, signed by AWS with its RSA-2048 key for the region
 * (/latest/dynamic/instance-identity/rsa2048: a base64 PKCS #7 SignedData that carries the document as its content).
 * The signature is checked against AWS's public certificate for the region only (the bundled one, or the operator's):
 * any certificate the message carries is ignored, so nobody can bring their own signer. This is how SPIRE's aws_iid
 * node attestor verifies the RSA-2048 signature, and what Vault's AWS auth method does with the PKCS #7 one.
 *
 * CMS parsing and signature verification are PKI.js's (RFC 5652 SignedData, over WebCrypto), not written here.
 */

export class IdentityDocumentError extends Error {
  override name = 'IdentityDocumentError';
}

/** The fields fleetwise checks against its launch record; the document has more (architecture, privateIp, …). */
export const ec2IdentityDocumentSchema = z.object({
  instanceId: z.string().regex(/^i-[0-9a-f]{8,17}$/, 'an EC2 instance id'),
  region: z.string().min(1),
  accountId: z.string().regex(/^\d{12}$/, 'a 12-digit AWS account id'),
  imageId: z.string().regex(/^ami-[0-9a-f]{8,17}$/, 'an AMI id'),
  instanceType: z.string().min(1),
  availabilityZone: z.string().min(1),
  pendingTime: z.string().optional(),
});
export type Ec2IdentityDocument = z.infer<typeof ec2IdentityDocumentSchema>;

/** The PEM certificates in `text` (one or more `BEGIN CERTIFICATE` blocks), each parsed; none is an error. */
export function parseCertificates(text: string, source: string): X509Certificate[] {
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new IdentityDocumentError(`${source}: no PEM certificate in it`);
  return blocks.map((pem, i) => {
    try {
      return new X509Certificate(pem);
    } catch (e) {
      throw new IdentityDocumentError(`${source}: certificate ${i + 1}: ${(e as Error).message}`);
    }
  });
}

function arrayBufferOf(bytes: Uint8Array): ArrayBuffer {
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}

export class Ec2IdentityVerifier {
  private readonly trusted: readonly Certificate[];

  /**
   * @param certificates AWS's RSA-2048 certificate(s) for the controller's region, X.509.
   * @param source where they came from, for messages (a file path).
   */
  constructor(
    certificates: readonly X509Certificate[],
    readonly source: string,
  ) {
    if (certificates.length === 0)
      throw new IdentityDocumentError(`${source}: no certificate to verify with`);
    this.trusted = certificates.map((c) => Certificate.fromBER(arrayBufferOf(c.raw)));
  }

  /**
   * The document, once its signature verifies against a trusted certificate and the signed content is exactly
   * `documentText`; an IdentityDocumentError saying which check failed otherwise.
   */
  async verify(documentText: string, rsa2048Base64: string): Promise<Ec2IdentityDocument> {
    const signed = this.signedData(rsa2048Base64);
    const content = signed.encapContentInfo.eContent?.getValue();
    if (content === undefined || content.byteLength === 0)
      throw new IdentityDocumentError('the signature carries no document (a detached signature)');
    if (!Buffer.from(content).equals(Buffer.from(documentText, 'utf8')))
      throw new IdentityDocumentError('the document is not the one the signature covers');
    if (!(await this.verifiedByTrusted(signed)))
      throw new IdentityDocumentError(`the signature does not verify against ${this.source}`);
    let value: unknown;
    try {
      value = JSON.parse(documentText);
    } catch (e) {
      throw new IdentityDocumentError(`the signed document is not JSON: ${(e as Error).message}`);
    }
    const parsed = ec2IdentityDocumentSchema.safeParse(value);
    if (!parsed.success)
      throw new IdentityDocumentError(
        `the signed document lacks what a registration needs: ${parsed.error.issues
          .map((i) => `${i.path.join('.') || '(document)'}: ${i.message}`)
          .join('; ')}`,
      );
    return parsed.data;
  }

  private signedData(rsa2048Base64: string): SignedData {
    const der = Buffer.from(rsa2048Base64.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
    try {
      const info = ContentInfo.fromBER(arrayBufferOf(der));
      if (info.contentType !== ContentInfo.SIGNED_DATA) throw new Error(`content type ${info.contentType}`);
      const signed = new SignedData({ schema: info.content });
      if (signed.signerInfos.length !== 1)
        throw new Error(`${signed.signerInfos.length} signers where AWS signs once`);
      return signed;
    } catch (e) {
      throw new IdentityDocumentError(
        `the signature is not a PKCS #7 SignedData from /latest/dynamic/instance-identity/rsa2048: ${(e as Error).message}`,
      );
    }
  }

  /** True when one trusted certificate is the signer and its key verifies the signature. */
  private async verifiedByTrusted(signed: SignedData): Promise<boolean> {
    for (const certificate of this.trusted) {
      // Only our certificate is offered as the signer's, whatever the message carries.
      signed.certificates = [certificate];
      try {
        const result = await signed.verify({ signer: 0, checkChain: false, extendedMode: true });
        if (result.signatureVerified === true) return true;
      } catch {
        // not this certificate (another signer, or a signature that does not verify): try the next
      }
    }
    return false;
  }
}
