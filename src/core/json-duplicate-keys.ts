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

/** The repeated keys of a valid JSON text, in text order (at most `limit`). */
export function duplicateJsonKeys(text: string, limit = 10): DuplicateKey[] {
  const out: DuplicateKey[] = [];
  const stack: (ObjectFrame | ArrayFrame)[] = [];
  const childPath = (): readonly string[] => {
    const top = stack.at(-1);
    if (top === undefined) return [];
    return top.kind === 'object' ? [...top.path, top.lastKey] : [...top.path, String(top.index)];
  };
  for (let i = 0; i < text.length && out.length < limit; i++) {
    const c = text[i];
    if (c === '"') {
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      const top = stack.at(-1);
      if (top?.kind === 'object' && top.expectingKey) {
        const key = JSON.parse(text.slice(i, end + 1)) as string;
        if (top.keys.has(key)) out.push({ path: top.path, key });
        top.keys.add(key);
        top.lastKey = key;
        top.expectingKey = false;
      }
      i = end;
    } else if (c === '{') {
      stack.push({ kind: 'object', path: childPath(), keys: new Set(), expectingKey: true, lastKey: '' });
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
  return out;
}

/** A repeated key as a problem line, e.g. `tasks.0: the key "name" is given twice (JSON keeps only the last)`. */
export function duplicateKeyProblem(d: DuplicateKey, what = 'key'): string {
  const where = d.path.length === 0 ? '(root)' : d.path.join('.');
  return `${where}: the ${what} ${JSON.stringify(d.key)} is given more than once (JSON keeps only the last, so the others would be lost)`;
}
