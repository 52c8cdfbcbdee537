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

/** What the yaml parser calls a repeated key; kept so problems read the same as the parser's own. */
const DUPLICATE_KEY_MESSAGE = 'Map keys must be unique';

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
 * The error reads as the parser's, `Map keys must be unique at line L, column C`, at the repeated key.
 */
export function parseDocumentUniqueKeys(text: string, options: UniqueKeysParseOptions = {}): Document.Parsed {
  const lineCounter = options.lineCounter ?? new LineCounter();
  const doc = parseDocument(text, { ...options, lineCounter, uniqueKeys: false });
  const repeated = repeatedKeyOffsets(doc);
  if (repeated.length > 0) {
    // Each error quotes its source line: thousands of repeats on one long line (a flow map) would copy it as often.
    const shown = repeated.slice(0, MAX_REPEATED_KEY_ERRORS);
    const errors = shown.map((offset) => duplicateKeyError(text, lineCounter, offset, options));
    const more = repeated.length - shown.length;
    const next = repeated[shown.length];
    if (next !== undefined)
      errors.push(
        new YAMLParseError(
          [next, next + 1],
          'DUPLICATE_KEY',
          `${DUPLICATE_KEY_MESSAGE}: ${more} more repeated key${more === 1 ? '' : 's'} from line ${lineCounter.linePos(next).line}`,
        ),
      );
    doc.errors = [...doc.errors, ...errors].sort((a, b) => a.pos[0] - b.pos[0]);
  }
  return doc;
}

/** Where each repeated key starts, over every map of the document (keys that are collections included). */
function repeatedKeyOffsets(doc: Document.Parsed): number[] {
  const offsets: number[] = [];
  // An explicit stack: the parser has already built the nesting, and a deep one must not overflow this walk.
  const stack: unknown[] = [doc.contents];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (isMap(node)) {
      const seen = new Set<unknown>();
      for (const { key, value } of node.items) {
        if (isScalar(key)) {
          if (seen.has(key.value)) offsets.push(key.range?.[0] ?? 0);
          else seen.add(key.value);
        } else if (!isAlias(key)) stack.push(key);
        stack.push(value);
      }
    } else if (isSeq(node)) for (const item of node.items) stack.push(item);
  }
  return offsets;
}

/**
 * The parser's error for a repeated key at `offset`; with prettyErrors (its default) placed and quoted as the yaml
 * parser quotes its own errors (errors.js prettifyError): the line and column, the source line (cut to 80 characters
 * around the key, with the line before when the key starts its line) and a caret under the key.
 */
function duplicateKeyError(
  text: string,
  lineCounter: LineCounter,
  offset: number,
  options: UniqueKeysParseOptions,
): YAMLParseError {
  const error = new YAMLParseError([offset, offset + 1], 'DUPLICATE_KEY', DUPLICATE_KEY_MESSAGE);
  if (options.prettyErrors === false) return error;
  const at = lineCounter.linePos(offset);
  error.linePos = [at, lineCounter.linePos(offset + 1)];
  const { line, col } = at;
  error.message += ` at line ${line}, column ${col}`;
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
  if (/[^ ]/.test(quoted)) error.message += `:\n\n${quoted}\n${' '.repeat(caret)}^\n`;
  return error;
}
