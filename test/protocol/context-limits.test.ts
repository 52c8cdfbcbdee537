import { describe, expect, it } from 'vitest';
import {
  ContextLimitError,
  DEFAULT_CONTEXT_LIMITS,
  ExpansionMeter,
  RATIO_CHECK_FROM_BYTES,
} from '../../src/protocol/context-limits.js';

/**
 * The expansion ratio as ExpansionMeter checks it: against the whole archive when its size is declared before it is
 * read, against the archive read so far otherwise.
 */
const MIB = 1024 * 1024;

/** What `meter` throws when `expanded` more bytes come out, or undefined. */
function expanding(meter: ExpansionMeter, expanded: number): unknown {
  try {
    meter.addExpanded(expanded);
    return undefined;
  } catch (e) {
    return e;
  }
}

describe('ExpansionMeter', () => {
  it('with a declared size, takes an archive whose compressible part comes first if the whole is within the ratio', () => {
    // 10 MiB of archive: 20 KiB of zeros expanding to 20 MiB, then 10 MiB of incompressible bytes.
    const archive = 10 * MIB + 20 * 1024;
    const declared = new ExpansionMeter(DEFAULT_CONTEXT_LIMITS, archive);
    declared.addArchive(20 * 1024);
    expect(expanding(declared, 20 * MIB)).toBeUndefined();
    declared.addArchive(10 * MIB);
    expect(expanding(declared, 10 * MIB)).toBeUndefined();
    expect([declared.archive, declared.expanded]).toEqual([archive, 30 * MIB]);

    // Without one, the zeros alone are measured against the 20 KiB read so far.
    const running = new ExpansionMeter(DEFAULT_CONTEXT_LIMITS);
    running.addArchive(20 * 1024);
    const refused = expanding(running, 20 * MIB);
    expect(refused).toBeInstanceOf(ContextLimitError);
    expect((refused as ContextLimitError).limit).toBe('maxExpansionRatio');
    expect((refused as Error).message).toBe(
      'the build context expands more than 100 times its archive read so far (20480 bytes to over 20 MiB; ' +
        'maxExpansionRatio): refused as a decompression bomb',
    );
  });

  it('with a declared size, refuses the expansion the moment it passes the ratio times that size', () => {
    const archive = 200 * 1024;
    const meter = new ExpansionMeter(DEFAULT_CONTEXT_LIMITS, archive);
    meter.addArchive(1024);
    expect(expanding(meter, 100 * archive)).toBeUndefined();
    const refused = expanding(meter, 1);
    expect(refused).toBeInstanceOf(ContextLimitError);
    expect((refused as Error).message).toBe(
      'the build context expands more than 100 times its archive (204800 bytes to over 19.5 MiB; ' +
        'maxExpansionRatio): refused as a decompression bomb',
    );
  });

  it('checks no ratio below RATIO_CHECK_FROM_BYTES expanded', () => {
    const meter = new ExpansionMeter(DEFAULT_CONTEXT_LIMITS, 10);
    meter.addArchive(10);
    expect(expanding(meter, RATIO_CHECK_FROM_BYTES)).toBeUndefined();
    expect((expanding(meter, 1) as ContextLimitError).limit).toBe('maxExpansionRatio');
  });

  it('refuses an archive declared over its limit before reading, and one read past its declared size', () => {
    const limits = { ...DEFAULT_CONTEXT_LIMITS, maxArchiveBytes: MIB };
    expect(() => new ExpansionMeter(limits, MIB + 1)).toThrow(
      new ContextLimitError(
        'maxArchiveBytes',
        'the build context archive is larger than its limit of 1 MiB (maxArchiveBytes)',
      ),
    );
    const meter = new ExpansionMeter(limits, 1000);
    meter.addArchive(1000);
    expect(() => meter.addArchive(1)).toThrow(
      'the build context archive is longer than the 1000 bytes declared for it (1001 bytes read): ' +
        'a different or damaged archive',
    );
  });

  it('refuses a declared size that is not a whole number of bytes, naming it', () => {
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])
      expect(() => new ExpansionMeter(DEFAULT_CONTEXT_LIMITS, bad)).toThrow(
        `declaredArchiveBytes must be a whole number of bytes ≥ 0, not ${String(bad)}`,
      );
  });
});
