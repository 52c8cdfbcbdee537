import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { stringify as toYaml } from 'yaml';
import { mutated, oddValue, SchemaArbitraries, toJsonText, type JsonSchema } from './schema-arbitrary.js';

/**
 * HTTP requests to fuzz an API with, derived from its OpenAPI document: every operation the document lists (so a new
 * route is fuzzed by being documented, which test/controller/api.test.ts requires), with path, query and header parameters,
 * bodies shaped by the request schemas (valid, near-valid, arbitrary JSON, YAML, raw bytes), right and wrong content
 * types, and every kind of caller.
 */

export interface Operation {
  readonly method: string;
  /** The OpenAPI path template, e.g. `/v1/jobs/{id}`. */
  readonly path: string;
  readonly operationId: string;
  readonly pathParams: readonly string[];
  readonly queryParams: readonly { readonly name: string; readonly schema: JsonSchema }[];
  /** Header parameters the operation declares (e.g. Idempotency-Key), by name as written. */
  readonly headerParams: readonly { readonly name: string; readonly schema: JsonSchema }[];
  /** Request body schemas by content type (empty when the operation takes no body). */
  readonly bodies: ReadonlyMap<string, JsonSchema>;
}

/** Who a request claims to be; the test maps each to an Authorization header when it sends. */
export const CALLERS = [
  'none',
  'admin',
  'team',
  'revoked-team',
  'worker-bootstrap',
  'worker-instance',
  'garbage',
  'malformed',
] as const;
export type Caller = (typeof CALLERS)[number];

export interface FuzzRequest {
  readonly operationId: string;
  readonly method: string;
  /** Path and query string, exactly as sent. */
  readonly target: string;
  readonly caller: Caller;
  readonly contentType?: string;
  readonly body?: Uint8Array;
  /** Declared header parameters sent (besides authorization and content type). */
  readonly headers?: Readonly<Record<string, string>>;
}

export interface FuzzInputs {
  /** Ids that exist (jobs, an instance, a token) for path parameters, besides odd ones. */
  readonly knownIds: readonly string[];
  /** Valid bodies per operationId to mutate: the closest misses come from real requests. */
  readonly seeds: Readonly<Record<string, readonly unknown[]>>;
  /** Valid tar and gzip archives for archive uploads. */
  readonly archives: readonly Uint8Array[];
}

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function declaredParameters(
  parameters: readonly Readonly<Record<string, unknown>>[],
  where: 'query' | 'header',
): { readonly name: string; readonly schema: JsonSchema }[] {
  return parameters
    .filter((p) => p['in'] === where && typeof p['name'] === 'string')
    .map((p) => ({
      name: p['name'] as string,
      schema: isObject(p['schema']) ? p['schema'] : { type: 'string' },
    }));
}

/** Every operation of the document. */
export function operationsOf(document: JsonSchema): Operation[] {
  const arbitraries = new SchemaArbitraries(document);
  const paths = isObject(document['paths']) ? document['paths'] : {};
  const out: Operation[] = [];
  for (const [path, item] of Object.entries(paths)) {
    if (!isObject(item)) continue;
    for (const [method, op] of Object.entries(item)) {
      if (!isObject(op)) continue;
      const parameters = (Array.isArray(op['parameters']) ? op['parameters'] : [])
        .filter(isObject)
        .map((p) => arbitraries.resolve(p));
      const content = isObject(op['requestBody']) ? op['requestBody']['content'] : undefined;
      const bodies = new Map<string, JsonSchema>();
      if (isObject(content))
        for (const [type, media] of Object.entries(content))
          if (isObject(media) && isObject(media['schema'])) bodies.set(type, media['schema']);
      out.push({
        method: method.toUpperCase(),
        path,
        operationId: typeof op['operationId'] === 'string' ? op['operationId'] : `${method} ${path}`,
        pathParams: [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] as string),
        queryParams: declaredParameters(parameters, 'query'),
        headerParams: declaredParameters(parameters, 'header'),
        bodies,
      });
    }
  }
  return out;
}

/** Path segments as sent (already percent-encoded or deliberately not): traversal, bad escapes, sizes, keywords. */
const ODD_SEGMENTS = [
  '%00',
  '..',
  '%2e%2e',
  '%2F',
  'job-1%2Fcancel',
  '%zz',
  '%',
  '%F0%9F%92%A5',
  '%ff%fe%fd',
  '%C0%AF',
  '__proto__',
  'constructor',
  'hasOwnProperty',
  'x'.repeat(8_000),
  '-1',
  '0',
  '1e309',
  'null',
  'undefined',
  'job-0',
  'job-99999999999999999999',
  "job-1'--",
  'inst-1;',
  '*',
  '~',
  "!$&'()*+,;=:@",
  'i-0123456789abcdef0',
  '000000000000',
  'ffffffffffff',
];

const ODD_QUERY_TAILS = [
  '%zz=1',
  '&&&',
  '=',
  '==',
  '[]=1',
  'a[b]=c',
  '__proto__=x',
  '__proto__[polluted]=1',
  'constructor[prototype][polluted]=1',
  'state[]=queued',
  'limit=1e400',
  'limit=-0',
  'limit=0x10',
  'limit=%20',
  'since=' + '9'.repeat(400),
  'since=1e400',
  'since=-1',
  'since=99999999999999999999d',
  'since=0001-01-01T00:00:00Z',
  'since=275760-09-13T00:00:00.001Z',
  'dryRun=TRUE',
  'dryRun=true&dryRun=false',
  'team=' + 'a'.repeat(5_000),
  'x=' + '%41'.repeat(3_000),
];

const JSON_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'Application/JSON',
  'application/json; charset=utf-16',
  'application/json;;;',
  'application/json; boundary="',
];
const OTHER_TYPES = [
  'application/yaml',
  'text/yaml',
  'text/plain',
  'application/x-tar',
  'application/gzip',
  'text/html',
  'multipart/form-data; boundary=x',
  'application/x-www-form-urlencoded',
  'application/octet-stream',
  'a/b/c',
  '*/*',
  ';',
  '',
];

/** Bodies no value in this process could be serialized to: nested far past any stack. */
const DEEP_TEXTS = [
  `${'['.repeat(500_000)}${']'.repeat(500_000)}`,
  `{"name":"deep","queue":{"stages":${'['.repeat(200_000)}${']'.repeat(200_000)}}}`,
  `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`,
];

const ODD_YAML = [
  'a: &a [1,2]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n',
  'name: x\nname: y\n',
  'f: !!js/function "function(){}"\n',
  'b: !!binary aGVsbG8=\n',
  'base: &base {name: a}\njob:\n  <<: *base\n',
  '? [a, b]\n: c\n',
  '---\nname: a\n---\nname: b\n',
  '\uFEFFname: bom\n',
  'name:\tx\n',
  'n: .inf\nm: .nan\nh: 0x1F\nu: 1_000\nt: 2001-12-14t21:59:43.10-05:00\nz: ~\n',
  `q: ${'['.repeat(500)}${']'.repeat(500)}\n`,
  `q: ${'{a: '.repeat(200)}1${'}'.repeat(200)}\n`,
  `${Array.from({ length: 300 }, (_, i) => `${' '.repeat(i)}k${i}:`).join('\n')} 1\n`,
  '%YAML 9.9\n---\na: 1\n',
  '!<tag:yaml.org,2002:python/object/apply:os.system> ["id"]\n',
  '*undefined_alias\n',
  "'unterminated\n",
  'tasks: [{demand: [0, 1, 1e400], image: x}]\nname: x\n',
];

/** A JSON text or YAML document of `value`, with a content type that says so or one that does not. */
function serializedBody(
  value: unknown,
  declared: readonly string[],
): fc.Arbitrary<{ contentType?: string; body?: Uint8Array }> {
  const utf8 = (text: string): Uint8Array => Buffer.from(text, 'utf8');
  const yamlOk = declared.some((t) => t.includes('yaml'));
  let yamlText: string;
  try {
    yamlText = toYaml(value, { aliasDuplicateObjects: false });
  } catch {
    yamlText = toJsonText(value);
  }
  return fc.oneof(
    {
      weight: 6,
      arbitrary: fc
        .constantFrom(...JSON_TYPES)
        .map((contentType) => ({ contentType, body: utf8(toJsonText(value)) })),
    },
    {
      weight: yamlOk ? 3 : 1,
      arbitrary: fc
        .constantFrom('application/yaml', 'text/yaml', 'text/plain')
        .map((contentType) => ({ contentType, body: utf8(yamlText) })),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(...OTHER_TYPES)
        .map((contentType) => ({ contentType, body: utf8(toJsonText(value)) })),
    },
    // No Content-Type at all.
    { weight: 1, arbitrary: fc.constant({ body: utf8(toJsonText(value)) }) },
  );
}

function valueFor(
  schema: JsonSchema | undefined,
  seeds: readonly unknown[],
  arbitraries: SchemaArbitraries,
): fc.Arbitrary<unknown> {
  const schemaValue = schema === undefined ? fc.jsonValue({ maxDepth: 3 }) : arbitraries.valueOf(schema);
  return fc.oneof(
    ...(seeds.length > 0
      ? [
          { weight: 2, arbitrary: fc.constantFrom(...seeds) },
          { weight: 6, arbitrary: fc.constantFrom(...seeds).chain(mutated) },
        ]
      : []),
    { weight: 4, arbitrary: schemaValue },
    { weight: 3, arbitrary: schemaValue.chain(mutated) },
    { weight: 1, arbitrary: oddValue() },
    { weight: 1, arbitrary: fc.jsonValue() },
  );
}

function bodyFor(
  op: Operation,
  inputs: FuzzInputs,
  arbitraries: SchemaArbitraries,
): fc.Arbitrary<{ contentType?: string; body?: Uint8Array }> {
  const declared = [...op.bodies.keys()];
  const jsonSchema = op.bodies.get('application/json') ?? op.bodies.get('application/yaml');
  const takesArchives = declared.some((t) => t.includes('tar') || t.includes('gzip'));
  const structured = valueFor(jsonSchema, inputs.seeds[op.operationId] ?? [], arbitraries).chain((v) =>
    serializedBody(v, declared),
  );
  const archive = fc.oneof(
    fc.constantFrom(...inputs.archives),
    fc.constantFrom(...inputs.archives).chain((a) => fc.nat({ max: a.length }).map((n) => a.subarray(0, n))),
    fc.uint8Array({ maxLength: 4096 }).map((bytes) => new Uint8Array(gzipSync(bytes))),
    fc.uint8Array({ minLength: 1024, maxLength: 4096 }).map((bytes) => {
      // A ustar magic in front of garbage: passes a magic-number check, fails anything more.
      const out = new Uint8Array(bytes.length - (bytes.length % 512));
      out.set(bytes.subarray(0, out.length));
      out.set(Buffer.from('ustar'), 257);
      return out;
    }),
  );
  const raw = fc.record(
    {
      contentType: fc.constantFrom(...declared, ...JSON_TYPES, ...OTHER_TYPES),
      body: fc.uint8Array({ maxLength: 4096 }),
    },
    { requiredKeys: ['body'] },
  );
  return fc.oneof(
    { weight: declared.length > 0 && !takesArchives ? 8 : 2, arbitrary: structured },
    {
      weight: takesArchives ? 8 : 0,
      arbitrary: fc
        .tuple(fc.constantFrom(...declared, 'application/x-gzip'), archive)
        .map(([contentType, body]) => ({ contentType, body })),
    },
    { weight: 1, arbitrary: raw },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom('application/yaml', 'text/plain', ...JSON_TYPES), fc.constantFrom(...ODD_YAML))
        .map(([contentType, text]) => ({ contentType, body: Buffer.from(text, 'utf8') })),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom(...JSON_TYPES, 'application/yaml'), fc.constantFrom(...DEEP_TEXTS))
        .map(([contentType, text]) => ({ contentType, body: Buffer.from(text, 'utf8') })),
    },
    // No body, with or without a type, or an empty JSON object: what a route that takes no body is meant to get, so
    // such a route is mostly asked as it should be (it refuses anything else), and its action is fuzzed too.
    {
      weight: declared.length === 0 ? 8 : 1,
      arbitrary: fc.constantFrom<{ contentType?: string; body?: Uint8Array }>(
        {},
        { contentType: 'application/json' },
        { contentType: 'application/json', body: Buffer.from('{}', 'utf8') },
      ),
    },
  );
}

function segmentFor(inputs: FuzzInputs): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...inputs.knownIds) },
    { weight: 3, arbitrary: fc.constantFrom(...ODD_SEGMENTS) },
    { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }).map(encodeURIComponent) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }).map(encodeURIComponent) },
  );
}

function queryFor(op: Operation, arbitraries: SchemaArbitraries): fc.Arbitrary<string> {
  const declared = op.queryParams.map((p) =>
    fc.option(
      fc
        .oneof(
          arbitraries
            .valueOf(p.schema)
            .map((v) => encodeURIComponent(typeof v === 'string' ? v : JSON.stringify(v))),
          fc.string({ unit: 'grapheme', maxLength: 30 }).map(encodeURIComponent),
          fc.constantFrom('', '%zz', '%00', 'true', '-1', '0', '1e400', 'queued,,running', 'QUEUED'),
        )
        .map((value) => `${p.name}=${value}`),
      { freq: 2 },
    ),
  );
  const odd = fc.option(fc.constantFrom(...ODD_QUERY_TAILS), { freq: 3 });
  return fc.tuple(fc.tuple(...declared), odd, fc.boolean()).map(([pairs, tail, repeat]) => {
    const parts = [...pairs.filter((p): p is string => p !== null), ...(tail === null ? [] : [tail])];
    if (repeat && parts.length > 0) parts.push(parts[0] as string);
    return parts.length === 0 ? '' : `?${parts.join('&')}`;
  });
}

/** Characters a header value may hold as Node's client sends it (visible ASCII and space). */
const HEADER_CHARS = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i));

/** Declared header parameters: schema-shaped values, near misses and junk, each sometimes left out. */
function headersFor(op: Operation, arbitraries: SchemaArbitraries): fc.Arbitrary<Record<string, string>> {
  const declared = op.headerParams.map((p) =>
    fc.option(
      fc
        .oneof(
          {
            weight: 3,
            arbitrary: arbitraries
              .valueOf(p.schema)
              .map((v) => (typeof v === 'string' ? v : JSON.stringify(v))),
          },
          { weight: 2, arbitrary: fc.string({ unit: fc.constantFrom(...HEADER_CHARS), maxLength: 300 }) },
          { weight: 1, arbitrary: fc.constantFrom('', ' ', 'x'.repeat(256), 'a b', 'fuzz-key', 'fuzz-key') },
        )
        .map((value) => [p.name.toLowerCase(), value] as const),
      { freq: 2 },
    ),
  );
  return fc
    .tuple(...declared)
    .map((pairs) => Object.fromEntries(pairs.filter((p): p is readonly [string, string] => p !== null)));
}

/** Requests to one operation: its method mostly, sometimes another. */
export function requestsFor(
  op: Operation,
  inputs: FuzzInputs,
  document: JsonSchema,
): fc.Arbitrary<FuzzRequest> {
  const arbitraries = new SchemaArbitraries(document);
  const segments = fc.tuple(...op.pathParams.map(() => segmentFor(inputs)));
  const method = fc.oneof(
    { weight: 12, arbitrary: fc.constant(op.method) },
    // Not HEAD: a server that cannot parse a request (headers too large) answers it with a body, which a client that
    // sent HEAD cannot read; raw-byte fuzzing sends HEAD instead.
    { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS') },
  );
  const caller = fc.oneof(
    { weight: 5, arbitrary: fc.constant<Caller>('admin') },
    { weight: 4, arbitrary: fc.constant<Caller>('team') },
    {
      weight: op.path.startsWith('/v1/workers/') ? 8 : 1,
      arbitrary: fc.constantFrom<Caller>('worker-bootstrap', 'worker-instance'),
    },
    { weight: 2, arbitrary: fc.constantFrom<Caller>('none', 'revoked-team', 'garbage', 'malformed') },
  );
  return fc
    .record({
      method,
      segments,
      query: queryFor(op, arbitraries),
      caller,
      body: bodyFor(op, inputs, arbitraries),
      headers: headersFor(op, arbitraries),
    })
    .map(({ method: m, segments: values, query, caller: c, body, headers }) => {
      let i = 0;
      const path = op.path.replace(/\{[^}]+\}/g, () => values[i++] ?? '');
      return {
        operationId: op.operationId,
        method: m,
        target: `${path}${query}`,
        caller: c,
        ...(body.contentType === undefined ? {} : { contentType: body.contentType }),
        ...('body' in body && body.body !== undefined ? { body: body.body } : {}),
        ...(Object.keys(headers).length === 0 ? {} : { headers }),
      };
    });
}
