import {
  isAlias,
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  YAMLParseError,
  type Document,
  type DocumentOptions,
  type ParseOptions,
  type SchemaOptions,
} from 'yaml';

/** Widest key named in a problem: a key of thousands of characters is cut, not copied whole into each problem. */
const NAMED_KEY_CHARS = 60;

/** Repeated keys told one by one; past them, one error counts the rest. */
const MAX_REPEATED_KEY_ERRORS = 20;

/** Widest source line quoted under a problem (as the yaml parser quotes it). */
const QUOTED_LINE_CHARS = 80;

export type UniqueKeysParseOptions = Omit<ParseOptions & DocumentOptions & SchemaOptions, 'uniqueKeys'>;

/**
 * Parse YAML (or JSON) text into a document in which a map repeating a key is an error, as `uniqueKeys: true` makes
 * it, but in time linear in the text: the yaml parser's own check compares each key with every earlier key of its map,
 * so a spec of 20,000 keys in one map (a few hundred KiB) held the controller's event loop for tens of seconds.
 * Here each map's keys go into a Set in one pass over the parsed document. Keys are equal as the parser compares them
 * (scalars by value: `a` and `"a"` repeat, `1` and `"1"` do not), but that two `.nan` keys repeat too (both would be
 * the key NaN); aliases and collections as keys never repeat.
 * Each error is placed and quoted as the parser's own, at the repeated key, but names the key on its first line:
 * `the key "name" is given more than once, again at line L, column C`. Readers that keep only the first line of a
 * parser error (the spec and config readers) so still say which key, where the parser's `Map keys must be unique at
 * line L, column C:` left the key unnamed and a colon pointing at a quote they drop.
 */
export function parseDocumentUniqueKeys(text: string, options: UniqueKeysParseOptions = {}): Document.Parsed {
  const lineCounter = options.lineCounter ?? new LineCounter();
  const doc = parseDocument(text, { ...options, lineCounter, uniqueKeys: false });
  const repeated = repeatedKeys(doc);
  if (repeated.length > 0) {
    // Each error quotes its source line: thousands of repeats on one long line (a flow map) would copy it as often.
    const shown = repeated.slice(0, MAX_REPEATED_KEY_ERRORS);
    const errors = shown.map((key) => duplicateKeyError(text, lineCounter, key, options));
    const more = repeated.length - shown.length;
    const next = repeated[shown.length]?.offset;
    if (next !== undefined)
      errors.push(
        new YAMLParseError(
          [next, next + 1],
          'DUPLICATE_KEY',
          `${more} more key${more === 1 ? ' is' : 's are'} given more than once, from line ${lineCounter.linePos(next).line} on`,
        ),
      );
    doc.errors = [...doc.errors, ...errors].sort((a, b) => a.pos[0] - b.pos[0]);
  }
  return doc;
}

/** A key given again in its map: its value, its text as written (a plain scalar's) and where the repeat starts. */
interface RepeatedKey {
  readonly value: unknown;
  readonly source: string | undefined;
  readonly offset: number;
}

/** Each repeated key, over every map of the document (keys that are collections included). */
function repeatedKeys(doc: Document.Parsed): RepeatedKey[] {
  const repeats: RepeatedKey[] = [];
  // An explicit stack: the parser has already built the nesting, and a deep one must not overflow this walk.
  const stack: unknown[] = [doc.contents];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (isMap(node)) {
      const seen = new Set<unknown>();
      for (const { key, value } of node.items) {
        if (isScalar(key)) {
          if (seen.has(key.value))
            repeats.push({ value: key.value, source: key.source, offset: key.range?.[0] ?? 0 });
          else seen.add(key.value);
        } else if (!isAlias(key)) stack.push(key);
        stack.push(value);
      }
    } else if (isSeq(node)) for (const item of node.items) stack.push(item);
  }
  return repeats;
}

/**
 * A repeated key as a problem names it: a string quoted as JSON (so a key with a line break keeps the problem on one
 * line, and `"1"` reads apart from `1`), another scalar as written at the repeat (`0x1F`, `~`, `.nan`); cut to
 * NAMED_KEY_CHARS.
 */
function keyName({ value, source }: RepeatedKey): string {
  const name =
    typeof value === 'string' ? JSON.stringify(value) : (source ?? String(value)).replace(/\s+/g, ' ');
  return name.length > NAMED_KEY_CHARS ? `${name.substring(0, NAMED_KEY_CHARS - 1)}…` : name;
}

/**
 * The error for a repeated key, naming it; with prettyErrors (the parser's default) placed and quoted as the yaml
 * parser quotes its own errors (errors.js prettifyError): the line and column, the source line (cut to 80 characters
 * around the key, with the line before when the key starts its line) and a caret under the key. The first line ends
 * with the column, not with the parser's colon, so it reads whole without the quote.
 */
function duplicateKeyError(
  text: string,
  lineCounter: LineCounter,
  key: RepeatedKey,
  options: UniqueKeysParseOptions,
): YAMLParseError {
  const { offset } = key;
  const error = new YAMLParseError(
    [offset, offset + 1],
    'DUPLICATE_KEY',
    `the key ${keyName(key)} is given more than once`,
  );
  if (options.prettyErrors === false) return error;
  const at = lineCounter.linePos(offset);
  error.linePos = [at, lineCounter.linePos(offset + 1)];
  const { line, col } = at;
  error.message += `, again at line ${line}, column ${col}`;
  const starts = lineCounter.lineStarts;
  let caret = col - 1;
  let quoted = text.substring(starts[line - 1] ?? 0, starts[line] ?? text.length).replace(/[\n\r]+$/, '');
  if (caret >= 60 && quoted.length > QUOTED_LINE_CHARS) {
    const trimStart = Math.min(caret - 39, quoted.length - 79);
    quoted = `…${quoted.substring(trimStart)}`;
    caret -= trimStart - 1;
  }
  if (quoted.length > QUOTED_LINE_CHARS) quoted = `${quoted.substring(0, 79)}…`;
  if (line > 1 && /^ *$/.test(quoted.substring(0, caret))) {
    let previous = text.substring(starts[line - 2] ?? 0, starts[line - 1] ?? 0);
    if (previous.length > QUOTED_LINE_CHARS) previous = `${previous.substring(0, 79)}…\n`;
    quoted = previous + quoted;
  }
  if (/[^ ]/.test(quoted)) error.message += `\n\n${quoted}\n${' '.repeat(caret)}^\n`;
  return error;
}

/**
 * A yaml parser error as one problem line: its first line, without the colon the parser ends it with to introduce the
 * source line it quotes below (which a one-line problem leaves out).
 */
export function yamlErrorLine(message: string): string {
  return (message.split('\n')[0] ?? message).replace(/:$/, '');
}
