/**
 * The order a JSON text writes each object's keys in. JSON.parse's objects list integer-like keys (`"10"`, `"2"`)
 * first and in numeric order, whatever the text says, so a reader that must keep the file's order (Eva's job and task
 * ids are such keys) takes it from here. Runs over text JSON.parse has already accepted, in one pass, like the
 * repeated-key scan (core/json-duplicate-keys.ts).
 */

interface ObjectFrame {
  readonly kind: 'object';
  readonly keys: string[];
  readonly seen: Set<string>;
  readonly path: readonly string[];
  expectingKey: boolean;
  lastKey: string;
}

interface ArrayFrame {
  readonly kind: 'array';
  readonly path: readonly string[];
  index: number;
}

/** Each object's keys in text order (a repeated key where it first appears), by `keyOrderPath` of its path. */
export function jsonKeyOrder(text: string): ReadonlyMap<string, readonly string[]> {
  const order = new Map<string, string[]>();
  const stack: (ObjectFrame | ArrayFrame)[] = [];
  const childPath = (): readonly string[] => {
    const top = stack.at(-1);
    if (top === undefined) return [];
    return top.kind === 'object' ? [...top.path, top.lastKey] : [...top.path, String(top.index)];
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      const top = stack.at(-1);
      if (top?.kind === 'object' && top.expectingKey) {
        const key = JSON.parse(text.slice(i, end + 1)) as string;
        if (!top.seen.has(key)) top.keys.push(key);
        top.seen.add(key);
        top.lastKey = key;
        top.expectingKey = false;
      }
      i = end;
    } else if (c === '{') {
      const path = childPath();
      const frame: ObjectFrame = {
        kind: 'object',
        keys: [],
        seen: new Set(),
        path,
        expectingKey: true,
        lastKey: '',
      };
      order.set(keyOrderPath(frame.path), frame.keys);
      stack.push(frame);
    } else if (c === '[') {
      stack.push({ kind: 'array', path: childPath(), index: 0 });
    } else if (c === '}' || c === ']') {
      stack.pop();
    } else if (c === ',') {
      const top = stack.at(-1);
      if (top?.kind === 'object') top.expectingKey = true;
      else if (top !== undefined) top.index += 1;
    }
  }
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
