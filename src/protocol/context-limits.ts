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
  /** Expanded bytes per archive byte, checked once the expansion passes RATIO_CHECK_FROM_BYTES. */
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

function describeBytes(bytes: number): string {
  return bytes >= MIB ? `${Math.round((bytes / MIB) * 10) / 10} MiB` : `${bytes} bytes`;
}

/**
 * Counts an archive's bytes as they are read and what they expand to as they are decompressed, and throws
 * ContextLimitError the moment either passes its limit, so a stream is abandoned at the first byte too many.
 */
export class ExpansionMeter {
  private archiveBytes = 0;
  private expandedBytes = 0;

  constructor(readonly limits: ContextLimits) {}

  get archive(): number {
    return this.archiveBytes;
  }

  get expanded(): number {
    return this.expandedBytes;
  }

  /** `bytes` more of the archive were read. */
  addArchive(bytes: number): void {
    this.archiveBytes += bytes;
    const { maxArchiveBytes } = this.limits;
    if (this.archiveBytes > maxArchiveBytes)
      throw new ContextLimitError(
        'maxArchiveBytes',
        `the build context archive is larger than its limit of ${describeBytes(maxArchiveBytes)} (maxArchiveBytes)`,
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
    if (
      this.expandedBytes > RATIO_CHECK_FROM_BYTES &&
      this.expandedBytes > maxExpansionRatio * Math.max(1, this.archiveBytes)
    )
      throw new ContextLimitError(
        'maxExpansionRatio',
        `the build context expands more than ${maxExpansionRatio} times its archive ` +
          `(${describeBytes(this.archiveBytes)} to over ${describeBytes(this.expandedBytes)}; maxExpansionRatio): ` +
          'refused as a decompression bomb',
      );
  }
}
