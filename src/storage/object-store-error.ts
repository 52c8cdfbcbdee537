/**
 * A call to the object store that failed because of the store (unreachable, timed out, throttled, refused), after
 * the store's own bounded retries. Callers tell it apart from their own failures (a body stream that broke, an archive
 * that is not safe to extract): a failed store call is worth retrying later, a bad archive is not. Missing objects are
 * not failures (ObjectNotFoundError, `head` answering undefined), and neither are invalid keys (InvalidObjectKeyError).
 */
export type ObjectStoreOperation = 'put' | 'get' | 'head' | 'list' | 'delete';

export class ObjectStoreError extends Error {
  constructor(
    readonly operation: ObjectStoreOperation,
    /** The key (or, for a list, the prefix) the call was about. */
    readonly key: string,
    readonly location: string,
    /** Attempts made, when the store retried the call itself. */
    readonly attempts: number | undefined,
    cause: unknown,
  ) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    const tries = attempts === undefined || attempts <= 1 ? '' : ` after ${attempts} attempts`;
    super(`object store ${location}: ${operation} ${JSON.stringify(key)} failed${tries}: ${reason}`, {
      cause,
    });
    this.name = 'ObjectStoreError';
  }
}

export function isObjectStoreError(error: unknown): error is ObjectStoreError {
  return error instanceof ObjectStoreError;
}

/**
 * A put with `ifAbsent` that found the key already taken: someone else wrote it (for backups, another controller
 * writing the same cluster's backups to the same store). Not the store failing, so never retried as such.
 */
export class ObjectExistsError extends Error {
  constructor(
    readonly key: string,
    readonly location: string,
  ) {
    super(`object store ${location}: ${JSON.stringify(key)} already exists (put only if absent)`);
    this.name = 'ObjectExistsError';
  }
}

/** A body larger than the store can take as one object: trying again cannot help, so it is not an ObjectStoreError. */
export class ObjectTooLargeError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ObjectTooLargeError';
  }
}
