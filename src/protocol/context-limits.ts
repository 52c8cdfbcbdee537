import { z } from 'zod';

/**
 * How large an uploaded build context may be, checked where it is received (the controller, `POST /v1/contexts`) and
 * again where it is unpacked (the worker): its archive as sent, what it expands to once decompressed, and the ratio of
 * the two. The last catches a decompression bomb early: a few MiB of gzip that would expand to gigabytes is refused
 * once its expansion runs far past what real contexts compress to (source trees gzip 3–10×), long before it fills a
 * disk. Limits are per team (the controller's `buildContexts` configuration), with these defaults.
 */

export interface ContextLimits {
  /** The archive as uploaded (gzip-compressed or plain tar). */
  readonly maxArchiveBytes: number;
  /** The tar stream once decompressed (file contents, headers and padding). */
  readonly maxExpandedBytes: number;
  /**
   * Expanded bytes per archive byte, checked once the expansion passes RATIO_CHECK_FROM_BYTES: against the whole
   * archive's size where it is known before reading, otherwise against the archive read so far (ExpansionMeter).
   */
  readonly maxExpansionRatio: number;
}

const MIB = 1024 * 1024;

export const DEFAULT_CONTEXT_LIMITS: ContextLimits = {
  maxArchiveBytes: 256 * MIB,
  maxExpandedBytes: 1024 * MIB,
  maxExpansionRatio: 100,
};

/**
 * Below this many expanded bytes the ratio is not checked: a small archive of empty or repetitive files (tar pads
 * every entry to 512 bytes) expands many times over and harms nothing.
 */
export const RATIO_CHECK_FROM_BYTES = 16 * MIB;

const positiveBytes = z.number().int('a whole number of bytes').positive('must be > 0');

/** The limits as configured or sent to a worker; every field names its unit. */
export const contextLimitsSchema = z.strictObject({
  maxArchiveBytes: positiveBytes,
  maxExpandedBytes: positiveBytes,
  maxExpansionRatio: z.number().finite().min(1, 'must be ≥ 1 (an archive expands to at least its own size)'),
});

export type ContextLimit = keyof ContextLimits;

/** A build context over one of its limits; `limit` names which (the API answers 413 with the message). */
export class ContextLimitError extends Error {
  constructor(
    readonly limit: ContextLimit,
    message: string,
  ) {
    super(message);
    this.name = 'ContextLimitError';
  }
}

/** A byte count as limits and refusals show it: `12.5 MiB`, or `300 bytes` under a MiB. */
export function describeBytes(bytes: number): string {
  return bytes >= MIB ? `${Math.round((bytes / MIB) * 10) / 10} MiB` : `${bytes} bytes`;
}

/**
 * Counts an archive's bytes as they are read and what they expand to as they are decompressed, and throws
 * ContextLimitError the moment either passes its limit, so a stream is abandoned at the first byte too many.
 *
 * The ratio is checked against the archive's whole size when it is known before reading (`declaredArchiveBytes`: an
 * upload's Content-Length, a stored object's size). Cutting the expansion at ratio × that size bounds it exactly as
 * the ratio means, and an archive that compresses within the ratio overall is taken whatever the order of its files
 * (a zero-filled disk image first, incompressible weights after). Reading past the declared size is an error, so the
 * bound holds. Where no size is declared (a chunked upload), the ratio is checked against the archive read so far:
 * stricter, as a compressible first file can pass it while the whole would not.
 */
export class ExpansionMeter {
  private archiveBytes = 0;
  private expandedBytes = 0;

  constructor(
    readonly limits: ContextLimits,
    readonly declaredArchiveBytes?: number,
  ) {
    if (declaredArchiveBytes === undefined) return;
    if (!Number.isSafeInteger(declaredArchiveBytes) || declaredArchiveBytes < 0)
      throw new Error(
        `declaredArchiveBytes must be a whole number of bytes ≥ 0, not ${String(declaredArchiveBytes)}`,
      );
    // An archive declared larger than the limit is refused before a byte of it is read.
    this.checkArchive(declaredArchiveBytes);
  }

  get archive(): number {
    return this.archiveBytes;
  }

  get expanded(): number {
    return this.expandedBytes;
  }

  /** `bytes` more of the archive were read. */
  addArchive(bytes: number): void {
    this.archiveBytes += bytes;
    this.checkArchive(this.archiveBytes);
    const declared = this.declaredArchiveBytes;
    if (declared !== undefined && this.archiveBytes > declared)
      throw new Error(
        `the build context archive is longer than the ${describeBytes(declared)} declared for it ` +
          `(${describeBytes(this.archiveBytes)} read): a different or damaged archive`,
      );
  }

  /** The archive read so far expanded to `bytes` more. */
  addExpanded(bytes: number): void {
    this.expandedBytes += bytes;
    const { maxExpandedBytes, maxExpansionRatio } = this.limits;
    if (this.expandedBytes > maxExpandedBytes)
      throw new ContextLimitError(
        'maxExpandedBytes',
        `the build context expands to more than its limit of ${describeBytes(maxExpandedBytes)} (maxExpandedBytes)`,
      );
    const declared = this.declaredArchiveBytes;
    const against = Math.max(1, this.archiveBytes, declared ?? 0);
    if (this.expandedBytes > RATIO_CHECK_FROM_BYTES && this.expandedBytes > maxExpansionRatio * against)
      throw new ContextLimitError(
        'maxExpansionRatio',
        `the build context expands more than ${maxExpansionRatio} times its archive ` +
          (declared === undefined ? 'read so far ' : '') +
          `(${describeBytes(against)} to over ${describeBytes(this.expandedBytes)}; maxExpansionRatio): ` +
          'refused as a decompression bomb',
      );
  }

  private checkArchive(bytes: number): void {
    const { maxArchiveBytes } = this.limits;
    if (bytes > maxArchiveBytes)
      throw new ContextLimitError(
        'maxArchiveBytes',
        `the build context archive is larger than its limit of ${describeBytes(maxArchiveBytes)} (maxArchiveBytes)`,
      );
  }
}
