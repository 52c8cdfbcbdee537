import { walkJsonKeys } from '../../core/json-duplicate-keys.js';

/**
 * The order a JSON text writes each object's keys in. JSON.parse's objects list integer-like keys (`"10"`, `"2"`)
 * first and in numeric order, whatever the text says, so a reader that must keep the file's order (Eva's job and task
 * ids are such keys) takes it from here. Runs over text JSON.parse has already accepted, in one pass, like the
 * repeated-key scan (core/json-duplicate-keys.ts), with its walk.
 */

/** Each object's keys in text order (a repeated key where it first appears), by `keyOrderPath` of its path. */
export function jsonKeyOrder(text: string): ReadonlyMap<string, readonly string[]> {
  const order = new Map<string, string[]>();
  walkJsonKeys(
    text,
    (path, key, repeated) => {
      if (!repeated) order.get(keyOrderPath(path))?.push(key);
      return true;
    },
    (path) => void order.set(keyOrderPath(path), []),
  );
  return order;
}

/** The `jsonKeyOrder` entry of the object at `path`: its keys and array indices from the top (`[]`). */
export function keyOrderPath(path: readonly string[]): string {
  return JSON.stringify(path);
}

/**
 * An object's entries in the order `keys` gives (a text's order), then any it does not list in JSON.parse's order.
 */
export function entriesInOrder<T>(
  object: Readonly<Record<string, T>>,
  keys: readonly string[] | undefined,
): [string, T][] {
  if (keys === undefined) return Object.entries(object);
  const listed = new Set(keys);
  return [
    ...keys.filter((k) => Object.hasOwn(object, k)).map((k): [string, T] => [k, object[k] as T]),
    ...Object.entries(object).filter(([k]) => !listed.has(k)),
  ];
}
