/**
 * Object keys are the same for every store: S3-style, '/'-separated relative paths. The rules are the intersection of
 * what S3 and a POSIX directory can both hold, so that a checkpoint written to one store can be copied to the other
 * and so that no key can name a path outside a filesystem store's root.
 */

/** The filesystem store keeps in-flight writes here (same filesystem as the objects, so rename is atomic). */
export const RESERVED_TEMP_SEGMENT = '.fleetwise-tmp';

/** S3's limit on a key's UTF-8 length. */
export const MAX_KEY_BYTES = 1024;

export class InvalidObjectKeyError extends Error {
  constructor(
    readonly key: string,
    reason: string,
  ) {
    super(`invalid object key ${JSON.stringify(key)}: ${reason}`);
    this.name = 'InvalidObjectKeyError';
  }
}

export class ObjectNotFoundError extends Error {
  constructor(
    readonly key: string,
    readonly location: string,
  ) {
    super(`no object ${JSON.stringify(key)} in ${location}`);
    this.name = 'ObjectNotFoundError';
  }
}

// Control characters are legal in S3 keys but unprintable in logs and awkward in file names.
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

function segmentProblem(segment: string): string | undefined {
  if (segment === '') return 'empty path segment (leading, trailing or doubled "/")';
  if (segment === '.' || segment === '..') return `"${segment}" segments are not allowed`;
  return undefined;
}

function characterProblem(text: string): string | undefined {
  if (CONTROL_CHARACTERS.test(text)) return 'control characters are not allowed';
  if (text.includes('\\')) return 'backslashes are not allowed (use "/")';
  if (Buffer.byteLength(text, 'utf8') > MAX_KEY_BYTES) return `longer than ${MAX_KEY_BYTES} UTF-8 bytes`;
  return undefined;
}

/** Throw unless `key` is a valid object key; returns its '/'-separated segments. */
export function assertValidKey(key: string): string[] {
  const charProblem = characterProblem(key);
  if (charProblem !== undefined) throw new InvalidObjectKeyError(key, charProblem);
  const segments = key.split('/');
  for (const segment of segments) {
    const problem = segmentProblem(segment);
    if (problem !== undefined) throw new InvalidObjectKeyError(key, problem);
  }
  if (segments[0] === RESERVED_TEMP_SEGMENT)
    throw new InvalidObjectKeyError(key, `"${RESERVED_TEMP_SEGMENT}" is reserved for in-flight writes`);
  return segments;
}

/**
 * Throw unless `prefix` can start a valid key. A prefix is a plain string prefix (as in S3's ListObjectsV2), so its
 * last segment may be partial ("ckpt/job-1" matches "ckpt/job-10/…"); every complete segment must be valid.
 * Returns the complete segments (the directory part) and the partial last segment.
 */
export function assertValidPrefix(prefix: string): { directory: string[]; partial: string } {
  if (prefix === '') return { directory: [], partial: '' };
  const charProblem = characterProblem(prefix);
  if (charProblem !== undefined) throw new InvalidObjectKeyError(prefix, charProblem);
  const segments = prefix.split('/');
  const partial = segments.pop() ?? '';
  for (const segment of segments) {
    const problem = segmentProblem(segment);
    if (problem !== undefined) throw new InvalidObjectKeyError(prefix, problem);
  }
  return { directory: segments, partial };
}

/** S3 lists keys in ascending UTF-8 byte order; JavaScript's string order (UTF-16) differs above U+FFFF. */
export function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}
