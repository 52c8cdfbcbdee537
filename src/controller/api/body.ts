import type { Readable } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import { CST, Lexer } from 'yaml';
import { duplicateJsonKeys, duplicateKeyProblem } from '../../core/json-duplicate-keys.js';
import { formatFieldPath, ValidationError } from '../../core/validation.js';
import { JOB_SPEC_LIMITS } from '../job-spec/spec.js';
import { formatBytes, HttpError } from './errors.js';

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
export const JSON_CONTENT_TYPE = 'application/json';

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
  // YAML is refused past limits of its own, far below JSON's (job-spec/spec.ts maxYamlSpecBytes): fastify stops
  // reading at the byte limit (on a route without a body limit of its own), and the nodes are counted before any
  // parser sees the text.
  app.addContentTypeParser(
    [...YAML_CONTENT_TYPES],
    { parseAs: 'string', bodyLimit: JOB_SPEC_LIMITS.maxYamlSpecBytes },
    (request, body, done) => {
      const text = String(body);
      if (yamlNodeCount(text, JOB_SPEC_LIMITS.maxYamlNodes) > JOB_SPEC_LIMITS.maxYamlNodes)
        return done(
          yamlTooLarge(`holds more than ${JOB_SPEC_LIMITS.maxYamlNodes} nodes (lines, keys, items)`, request),
        );
      done(null, { kind: 'yaml', text } satisfies RequestBody);
    },
  );
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

/** A YAML body over its limits: the route reads the same as JSON, up to its own body limit. */
function yamlTooLarge(why: string, request: Pick<FastifyRequest, 'routeOptions'>): HttpError {
  const json = request.routeOptions.bodyLimit;
  return new HttpError(
    413,
    `this YAML body ${why}: YAML is taken up to ${formatBytes(JOB_SPEC_LIMITS.maxYamlSpecBytes)} and ` +
      `${JOB_SPEC_LIMITS.maxYamlNodes} nodes; send a larger one as JSON (Content-Type: ${JSON_CONTENT_TYPE})` +
      (json === undefined ? '' : `, taken up to ${formatBytes(json)}`),
  );
}

const FLOW_INDICATORS = '[]{},';
const TOKEN_INDICATORS = '-?:!&*\'"#|>%@`';
/**
 * What a token may start after and a key's `:` be followed by: blanks, line breaks, flow indicators, and a quote
 * (`""""` is two scalars).
 */
const TOKEN_BOUNDARIES = ' \t\r\n[]{},\'"';

/**
 * The nodes of YAML `text`, counted in one pass until past `max`, as a bound of the YAML parser's work (a few µs a
 * node, each standing for a few tokens at most): each line break, each flow indicator (`[ ] { } ,`), each `:` ending
 * a key, and each indicator starting a token (`- ? : ! & * ' " # | > % @` or a backquote after a blank, a line break,
 * a flow indicator or a quote). Quoted text is not told apart: its indicators only count too many. The words of a
 * plain scalar (`a b c`) are one token to the parser and count none.
 */
export function yamlNodeCount(text: string, max = Infinity): number {
  let nodes = 0;
  let tokenStart = true;
  for (let i = 0; i < text.length && nodes <= max; i += 1) {
    const c = text[i] as string;
    // A lone carriage return is a line break too; the parser's flow collections take time quadratic in a run of them.
    if (c === '\n' || (c === '\r' && text[i + 1] !== '\n') || FLOW_INDICATORS.includes(c)) nodes += 1;
    else if (tokenStart && TOKEN_INDICATORS.includes(c)) nodes += 1;
    else if (c === ':' && (i + 1 === text.length || TOKEN_BOUNDARIES.includes(text[i + 1] as string)))
      nodes += 1;
    tokenStart = TOKEN_BOUNDARIES.includes(c);
  }
  return nodes;
}

/**
 * What the API answers for a body fastify refused before its route saw it, where the API has more to say than
 * toHttpError: a YAML body over YAML's own byte limit (which JSON is not held to), and a body of a content type the
 * route does not take, or none, with the types it takes (`takes`, from the route table: none for a route that takes
 * no body). Undefined for any other error.
 */
export function bodyRefusal(
  error: unknown,
  request: Pick<FastifyRequest, 'headers' | 'routeOptions'>,
  takes: readonly string[],
): HttpError | undefined {
  const code = (error as Partial<FastifyError> | null)?.code;
  const type = request.headers['content-type'];
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE' && type !== undefined && isYamlType(type))
    return yamlTooLarge(`is larger than ${formatBytes(JOB_SPEC_LIMITS.maxYamlSpecBytes)}`, request);
  if (code !== 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return undefined;
  const accepted =
    takes.length === 0
      ? `this request takes no body (or {} as ${JSON_CONTENT_TYPE})`
      : `send ${takes.join(' or ')}`;
  return new HttpError(
    415,
    type === undefined
      ? `missing Content-Type header: ${accepted}`
      : `unsupported content type ${JSON.stringify(type)}: ${accepted}`,
  );
}

function isYamlType(contentType: string): boolean {
  const media = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  return (YAML_CONTENT_TYPES as readonly string[]).includes(media);
}

/** The parsed body, or undefined when the request had none. */
export function bodyOf(body: unknown): RequestBody | undefined {
  return typeof body === 'object' && body !== null && 'kind' in body ? (body as RequestBody) : undefined;
}

/**
 * No request has a reason to nest deeper than this; validation (zod), storage and serialization all recurse, so a
 * deeper body (a megabyte of `[`) would overflow the stack and answer 500 instead of saying what is wrong.
 */
export const MAX_BODY_DEPTH = JOB_SPEC_LIMITS.maxDepth;
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
 * The same check on YAML text, before the YAML parser sees it: the parser recurses on nested collections (and on the
 * levels a line closes), and a stack it overflows fails the request with a RangeError, or the whole process when V8
 * then compiles a regular expression (a fatal out-of-memory). The text is read by the parser's own lexer, linear and
 * without recursion, so quotes, comments and block scalars are told apart as the parser tells them. Counted: the
 * `[`/`{` nesting and the `:` pairs of a flow item (`[a: b: c]`), and the open block levels (each key, `- `, `? `
 * and `: ` of a line, so `- - -` and `? ? ?` too, closed by a line starting no deeper), named by their keys. This
 * counts at least the levels the parser makes. The parsed value is checked with tooDeepProblem too.
 */
export function tooDeepYamlProblem(text: string): string | undefined {
  const levels: { readonly column: number; readonly key: string | undefined }[] = [];
  // A flow collection may span lines: its depth carries over, and nothing inside it opens a block level.
  let flow = 0;
  // The `:` of the flow item being read, and of the items each open flow collection sits in.
  let pairs = 0;
  const outerPairs: number[] = [];
  let outerPairsTotal = 0;
  let line = 1;
  let column = 0;
  let lineStart = true;
  let scalar = false;
  // A scalar (or alias) of this line in block context, which a `:` right after it makes a key.
  let pending: { readonly column: number; readonly key: string } | undefined;
  const tooDeep = (): boolean => flow + outerPairsTotal + pairs + levels.length > MAX_BODY_DEPTH;
  const problem = (): string =>
    `${fieldPath(levels.flatMap((l) => (l.key === undefined ? [] : [l.key])))}: nested deeper than ` +
    `${MAX_BODY_DEPTH} levels (line ${line})`;
  for (const lexeme of new Lexer().lex(text)) {
    // The lexer's markers stand for no text; the source after SCALAR is a scalar's, whatever it reads as (`-x`).
    if (lexeme === CST.SCALAR) {
      scalar = true;
      continue;
    }
    if (lexeme === CST.DOCUMENT || lexeme === CST.FLOW_END) continue;
    const type = scalar ? 'scalar' : CST.tokenType(lexeme);
    scalar = false;
    const start = column;
    const startLine = line;
    for (let i = lexeme.indexOf('\n'); i >= 0; i = lexeme.indexOf('\n', i + 1)) {
      line += 1;
      column = lexeme.length - i - 1;
    }
    if (line === startLine) column += lexeme.length;
    if (type === 'newline') {
      lineStart = true;
      pending = undefined;
      continue;
    }
    if (type === 'space' || type === 'comment' || type === 'byte-order-mark') continue;
    const dash = type === 'seq-item-ind';
    if (lineStart && flow === 0) {
      // A line starting no deeper than an open level closes it: `- name:` and the `  image:` below it are siblings.
      // A sequence may sit at its key's own column (`tasks:` then `- name:`): it is that key's value.
      for (let top = levels.at(-1); top !== undefined; top = levels.at(-1)) {
        if (top.column < start || (top.column === start && dash && top.key !== undefined)) break;
        levels.pop();
      }
    }
    lineStart = false;
    if (type === 'flow-seq-start' || type === 'flow-map-start') {
      flow += 1;
      outerPairs.push(pairs);
      outerPairsTotal += pairs;
      pairs = 0;
    } else if (type === 'flow-seq-end' || type === 'flow-map-end') {
      flow = Math.max(0, flow - 1);
      pairs = outerPairs.pop() ?? 0;
      outerPairsTotal -= pairs;
    } else if (flow > 0) {
      if (type === 'comma') pairs = 0;
      else if (type === 'map-value-ind') pairs += 1;
    } else if (dash || type === 'explicit-key-ind') levels.push({ column: start, key: undefined });
    else if (type === 'map-value-ind') levels.push(pending ?? { column: start, key: undefined });
    if (tooDeep()) return problem();
    pending =
      flow > 0
        ? undefined
        : type === 'scalar' || type === 'alias'
          ? { column: start, key: lexeme.trim() }
          : type === 'single-quoted-scalar' || type === 'double-quoted-scalar'
            ? { column: start, key: lexeme.slice(1, -1) }
            : undefined;
  }
  return undefined;
}
