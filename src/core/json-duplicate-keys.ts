/**
 * Keys repeated within one object of a JSON text. JSON.parse keeps the last of them without a word, so a trace with a
 * job id written twice would silently lose a job, and an API body with `team` written twice would be taken with the
 * last; the trace parsers and the API refuse them instead, naming where they are (a YAML parser refuses them too).
 * Runs over text JSON.parse has already accepted, in one pass, so it need not report syntax errors.
 */

/** Where a repeated key is: the path of its object (keys and array indices, `(root)` for the top) and the key. */
export interface DuplicateKey {
  readonly path: readonly string[];
  readonly key: string;
}

interface ObjectFrame {
  readonly kind: 'object';
  readonly path: readonly string[];
  readonly keys: Set<string>;
  expectingKey: boolean;
  lastKey: string;
}

interface ArrayFrame {
  readonly kind: 'array';
  readonly path: readonly string[];
  index: number;
}

/**
 * Walk a valid JSON text's object keys in text order: `visit` gets each key with the path of its object (keys and
 * array indices from the top, `[]` for the top) and whether the object already had it; returning false stops the walk.
 * An object is announced by `enter` before its first key (with its path), so an empty one is seen too.
 */
export function walkJsonKeys(
  text: string,
  visit: (path: readonly string[], key: string, repeated: boolean) => boolean,
  enter: (path: readonly string[]) => void = () => {},
): void {
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
        const repeated = top.keys.has(key);
        top.keys.add(key);
        top.lastKey = key;
        top.expectingKey = false;
        if (!visit(top.path, key, repeated)) return;
      }
      i = end;
    } else if (c === '{') {
      const path = childPath();
      enter(path);
      stack.push({ kind: 'object', path, keys: new Set(), expectingKey: true, lastKey: '' });
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
}

/** The repeated keys of a valid JSON text, in text order (at most `limit`). */
export function duplicateJsonKeys(text: string, limit = 10): DuplicateKey[] {
  const out: DuplicateKey[] = [];
  walkJsonKeys(text, (path, key, repeated) => {
    if (repeated) out.push({ path, key });
    return out.length < limit;
  });
  return out;
}

/** A repeated key as a problem line, e.g. `tasks.0: the key "name" is given twice (JSON keeps only the last)`. */
export function duplicateKeyProblem(d: DuplicateKey, what = 'key'): string {
  const where = d.path.length === 0 ? '(root)' : d.path.join('.');
  return `${where}: the ${what} ${JSON.stringify(d.key)} is given more than once (JSON keeps only the last, so the others would be lost)`;
}
