import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { duplicateJsonKeys, duplicateKeyProblem } from '../../core/json-duplicate-keys.js';
import { formatFieldPath, ValidationError } from '../../core/validation.js';
import { HttpError } from './errors.js';

/**
 * Request bodies the API accepts. Fastify's own parsers are replaced so every body keeps its raw text (YAML specs
 * are validated from the text, which lets errors name lines) and malformed JSON, or JSON repeating a key, is a 400
 * that names the problem.
 * An archive (a build context upload) is not read here: its route streams it to the object store as it arrives,
 * checking it on the way (context-inspector.ts), so an upload is never held whole in memory.
 */
export type RequestBody =
  | { readonly kind: 'json'; readonly text: string; readonly value: unknown }
  | { readonly kind: 'yaml'; readonly text: string }
  | { readonly kind: 'archive'; readonly encoding: 'tar' | 'gzip'; readonly stream: Readable };

/** The one route that takes an archive. */
export const CONTEXT_UPLOAD_URL = '/v1/contexts';

export const YAML_CONTENT_TYPES = [
  'application/yaml',
  'application/x-yaml',
  'text/yaml',
  'text/x-yaml',
  'text/plain',
] as const;
export const TAR_CONTENT_TYPE = 'application/x-tar';
export const GZIP_CONTENT_TYPES = ['application/gzip', 'application/x-gzip'] as const;

export function registerBodyParsers(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, { kind: 'json', text, value: undefined } satisfies RequestBody);
    let value: unknown;
    try {
      value = JSON.parse(text) as unknown;
    } catch (e) {
      done(new HttpError(400, `malformed JSON body: ${(e as Error).message}`), undefined);
      return;
    }
    const tooDeep = tooDeepProblem(value);
    if (tooDeep !== undefined) {
      done(new ValidationError('request body', [tooDeep]), undefined);
      return;
    }
    // JSON.parse keeps the last of a repeated key without a word (`"team"` twice submits for the second team);
    // the same text sent as YAML is refused, and so is this.
    const duplicates = duplicateJsonKeys(text);
    if (duplicates.length > 0) {
      done(
        new ValidationError(
          'request body',
          duplicates.map((d) => duplicateKeyProblem(d)),
        ),
        undefined,
      );
      return;
    }
    done(null, { kind: 'json', text, value } satisfies RequestBody);
  });
  app.addContentTypeParser([...YAML_CONTENT_TYPES], { parseAs: 'string' }, (_request, body, done) => {
    done(null, { kind: 'yaml', text: String(body) } satisfies RequestBody);
  });
  const archive =
    (encoding: 'tar' | 'gzip') =>
    (
      request: { readonly routeOptions: { readonly url?: string | undefined } },
      stream: Readable,
      done: (error: Error | null, body?: RequestBody) => void,
    ): void => {
      // Elsewhere an archive is refused before a byte of it is read (fastify then closes the connection).
      if (request.routeOptions.url !== CONTEXT_UPLOAD_URL)
        return done(
          new HttpError(415, `an archive is accepted only by ${CONTEXT_UPLOAD_URL}; send JSON or YAML here`),
        );
      done(null, { kind: 'archive', encoding, stream });
    };
  app.addContentTypeParser(TAR_CONTENT_TYPE, archive('tar'));
  app.addContentTypeParser([...GZIP_CONTENT_TYPES], archive('gzip'));
}

/** The parsed body, or undefined when the request had none. */
export function bodyOf(body: unknown): RequestBody | undefined {
  return typeof body === 'object' && body !== null && 'kind' in body ? (body as RequestBody) : undefined;
}

/**
 * No request has a reason to nest deeper than this; validation (zod), storage and serialization all recurse, so a
 * deeper body (a megabyte of `[`) would overflow the stack and answer 500 instead of saying what is wrong.
 */
export const MAX_BODY_DEPTH = 64;
/** Segments of a path named in the answer: enough to find the field, not the whole chain of a deep nesting. */
const NAMED_SEGMENTS = 8;

function fieldPath(keys: readonly string[]): string {
  return keys.length > NAMED_SEGMENTS
    ? `${formatFieldPath(keys.slice(0, NAMED_SEGMENTS))}…`
    : formatFieldPath(keys);
}

/**
 * The problem with a parsed body nested deeper than MAX_BODY_DEPTH, naming the innermost field (object key) on the
 * way down; undefined when it is not. Iterative, so the check itself cannot overflow.
 */
export function tooDeepProblem(value: unknown): string | undefined {
  const stack: { readonly value: unknown; readonly depth: number; readonly field: readonly string[] }[] = [
    { value, depth: 0, field: [] },
  ];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    if (typeof item.value !== 'object' || item.value === null) continue;
    const depth = item.depth + 1;
    if (depth > MAX_BODY_DEPTH)
      return `${fieldPath(item.field)}: nested deeper than ${MAX_BODY_DEPTH} levels`;
    if (Array.isArray(item.value)) {
      for (const v of item.value as readonly unknown[]) stack.push({ value: v, depth, field: item.field });
    } else
      for (const [k, v] of Object.entries(item.value))
        stack.push({
          value: v,
          depth,
          field: item.field.length > NAMED_SEGMENTS ? item.field : [...item.field, k],
        });
  }
  return undefined;
}

/**
 * The same check on YAML text, before the YAML parser (which recurses on nested collections) sees it: the open block
 * levels (each `key:` and each `- ` of a line, compact `- - -` sequences included, closed by a line indented no
 * deeper) plus the `[`/`{` nesting outside quotes and comments, named by the block keys it sits under. Linear in the
 * text: a quadratic scan of a hostile line would hold up the controller's event loop (and every heartbeat) for
 * minutes. The parsed value is checked with tooDeepProblem too.
 */
export function tooDeepYamlProblem(text: string): string | undefined {
  const levels: { readonly column: number; readonly key: string | undefined }[] = [];
  // A flow collection may span lines: its depth carries over, and a `key:` inside it is not a block key.
  let depth = 0;
  let line = 1;
  const tooDeep = (): string =>
    `${fieldPath(levels.flatMap((l) => (l.key === undefined ? [] : [l.key])))}: nested deeper than ` +
    `${MAX_BODY_DEPTH} levels (line ${line})`;
  for (const raw of text.split('\n')) {
    if (depth === 0) {
      let column = 0;
      while (column < raw.length && (raw[column] === ' ' || raw[column] === '\t')) column += 1;
      if (column < raw.length && raw[column] !== '#') {
        // A line indented no deeper than an open level closes it: `- name:` and the `  image:` below it are siblings.
        // A sequence may sit at its key's own column (`tasks:` then `- name:`): it is that key's value.
        const dash = isDashAt(raw, column);
        for (let top = levels.at(-1); top !== undefined; top = levels.at(-1)) {
          if (top.column < column || (top.column === column && dash && top.key !== undefined)) break;
          levels.pop();
        }
        while (isDashAt(raw, column)) {
          levels.push({ column, key: undefined });
          if (levels.length > MAX_BODY_DEPTH) return tooDeep();
          column += 1;
          while (raw[column] === ' ') column += 1;
        }
        const key = blockKeyAt(raw, column);
        if (key !== undefined) levels.push({ column, key });
        if (levels.length > MAX_BODY_DEPTH) return tooDeep();
      }
    }
    let quote: string | undefined;
    for (let i = 0; i < raw.length; i += 1) {
      const c = raw[i];
      if (quote !== undefined) {
        if (c === quote) quote = undefined;
        continue;
      }
      if (c === '"' || c === "'") quote = c;
      else if (c === '#' && (i === 0 || raw[i - 1] === ' ')) break;
      else if (c === '[' || c === '{') {
        depth += 1;
        if (depth + levels.length > MAX_BODY_DEPTH) return tooDeep();
      } else if (c === ']' || c === '}') depth = Math.max(0, depth - 1);
    }
    line += 1;
  }
  return undefined;
}

/** The block mapping key starting at `column` of a line (`key:`, `'key':`, `"key":`), if there is one. */
function blockKeyAt(raw: string, column: number): string | undefined {
  const first = raw[column];
  if (first === undefined) return undefined;
  if (first === '"' || first === "'") {
    const close = raw.indexOf(first, column + 1);
    if (close < 0) return undefined;
    let colon = close + 1;
    while (raw[colon] === ' ') colon += 1;
    return raw[colon] === ':' && isBlankOrEnd(raw, colon + 1) ? raw.slice(column + 1, close) : undefined;
  }
  if ('#:[]{}'.includes(first) || first === ' ' || first === '\t') return undefined;
  for (let i = column + 1; i < raw.length; i += 1) {
    const c = raw[i];
    if (c === '#') return undefined;
    if (c === ':') return isBlankOrEnd(raw, i + 1) ? raw.slice(column, i).trimEnd() : undefined;
  }
  return undefined;
}

/** A block sequence entry's `-` at `column`: followed by a blank or the end of the line. */
function isDashAt(raw: string, column: number): boolean {
  return raw[column] === '-' && isBlankOrEnd(raw, column + 1);
}

function isBlankOrEnd(raw: string, i: number): boolean {
  return i >= raw.length || raw[i] === ' ' || raw[i] === '\t' || raw[i] === '\r';
}
