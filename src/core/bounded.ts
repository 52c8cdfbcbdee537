/** The first of a bounded run's calls to fail: the item it was given and what it threw. */
export interface BoundedFailure<T> {
  readonly item: T;
  readonly error: unknown;
}

/**
 * Call `each` on every item, at most `limit` calls in flight at once (object-store writes, whose client has a bounded
 * pool of sockets). After the first failure no more calls start; those in flight settle first. Resolves with that
 * first failure, or undefined when every call succeeded.
 */
export async function runBounded<T>(
  items: readonly T[],
  limit: number,
  each: (item: T) => Promise<unknown>,
): Promise<BoundedFailure<T> | undefined> {
  let failure: BoundedFailure<T> | undefined;
  let next = 0;
  const lane = async (): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const item = items[next++] as T;
      try {
        await each(item);
      } catch (error) {
        failure ??= { item, error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, lane));
  return failure;
}
