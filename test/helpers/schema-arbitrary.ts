import fc from 'fast-check';

/**
 * fast-check arbitraries from OpenAPI 3.0 Schema Objects (the subset the controller's document uses: `$ref`, `allOf`,
 * `oneOf`/`anyOf`, `enum`, `type` with its bounds, `pattern`, `properties`/`required`/`additionalProperties`,
 * `nullable`), so a fuzz test follows the schemas as they change. `valueOf` draws values the schema describes;
 * `mutated` turns a value into a near miss (a field dropped, replaced by an odd value, or added).
 */

export type JsonSchema = Readonly<Record<string, unknown>>;

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Collections stay small: the point is their shape, and huge ones come from the odd values. */
const MAX_ITEMS = 4;
/** Past this depth an unbounded schema yields a leaf, so generation always ends. */
const MAX_DEPTH = 6;

/**
 * A raw JSON literal that JSON.stringify cannot write (`1e400` parses to Infinity, `-0`, a 400-digit integer): put
 * in a value as this marker string and substituted into the text by `toJsonText`.
 */
const RAW_MARK = '\u0001raw:';
export const rawLiteral = (text: string): string => `${RAW_MARK}${text}`;

/** The value as JSON text, raw literals in place. */
export function toJsonText(value: unknown): string {
  const text = JSON.stringify(value) ?? 'null';
  return text.replace(/"\\u0001raw:([^"]*)"/g, (_match, literal: string) => literal);
}

/** Values that break assumptions: bounds, types, encodings, sizes, prototype keys. */
export function oddValue(): fc.Arbitrary<unknown> {
  const deep = (depth: number, wrap: (inner: unknown) => unknown): unknown => {
    let value: unknown = 1;
    for (let i = 0; i < depth; i += 1) value = wrap(value);
    return value;
  };
  return fc.oneof(
    fc.constantFrom<unknown>(
      null,
      true,
      false,
      0,
      -1,
      0.5,
      -0.5,
      Number.MAX_SAFE_INTEGER + 2,
      -Number.MAX_SAFE_INTEGER - 2,
      Number.MAX_VALUE,
      -Number.MAX_VALUE,
      Number.MIN_VALUE,
      1e300,
      3_456_000,
      rawLiteral('1e400'),
      rawLiteral('-1e400'),
      rawLiteral('-0'),
      rawLiteral('9'.repeat(400)),
      rawLiteral('1.0000000000000000000000001'),
      '',
      ' ',
      '\u0000',
      'a\u0000b',
      '\ud800',
      '\u202e\u0301',
      '💥'.repeat(64),
      'NaN',
      'Infinity',
      '-1',
      '1e400',
      '99999999999999999999d',
      '../../etc/passwd',
      '/etc/passwd',
      's3://other-bucket/x',
      '${HOME}',
      '%00',
      'x'.repeat(70_000),
      [],
      {},
      [null],
      JSON.parse('{"__proto__":{"polluted":true}}') as unknown,
      { constructor: { prototype: { polluted: true } } },
      { toString: 'x', valueOf: 1, hasOwnProperty: null },
      Array.from({ length: 10_000 }, (_, i) => i),
      Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`k${i}`, i])),
      deep(60, (inner) => [inner]),
      deep(63, (inner) => ({ a: inner })),
      deep(200, (inner) => [inner]),
      // Deeper still is sent as text (api-fuzz-requests.ts): this test's own JSON.stringify recurses too.
      deep(1_000, (inner) => ({ a: inner })),
    ),
    fc.double(),
    fc.integer(),
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.string({ unit: 'grapheme', maxLength: 40 }),
    fc.jsonValue({ maxDepth: 3 }),
  );
}

/** Resolves `#/components/schemas/…` references against the document the schemas come from. */
export class SchemaArbitraries {
  constructor(private readonly document: JsonSchema) {}

  resolve(schema: JsonSchema): JsonSchema {
    let current = schema;
    for (let hops = 0; typeof current['$ref'] === 'string'; hops += 1) {
      if (hops > 16) throw new Error(`schema arbitrary: $ref loop at ${String(current['$ref'])}`);
      const target = this.pointer(current['$ref']);
      if (!isObject(target)) throw new Error(`schema arbitrary: no ${String(current['$ref'])}`);
      current = target;
    }
    return current;
  }

  private pointer(ref: string): unknown {
    if (!ref.startsWith('#/')) return undefined;
    let node: unknown = this.document;
    for (const raw of ref.slice(2).split('/'))
      node = isObject(node) ? node[raw.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
    return node;
  }

  /** Values of the schema (a generated value may still break a rule the schema cannot say, e.g. a catalog's families). */
  valueOf(schema: JsonSchema, depth = 0): fc.Arbitrary<unknown> {
    const s = this.resolve(schema);
    const base = this.baseValue(s, depth);
    return s['nullable'] === true ? fc.option(base, { nil: null, freq: 8 }) : base;
  }

  private baseValue(s: JsonSchema, depth: number): fc.Arbitrary<unknown> {
    if (Array.isArray(s['enum']) && s['enum'].length > 0) return fc.constantFrom(...(s['enum'] as unknown[]));
    const alternatives = (s['oneOf'] ?? s['anyOf']) as readonly JsonSchema[] | undefined;
    if (alternatives !== undefined && alternatives.length > 0)
      return fc.oneof(...alternatives.map((a) => this.valueOf(a, depth + 1)));
    const all = s['allOf'] as readonly JsonSchema[] | undefined;
    if (all !== undefined && all.length > 0) return this.allOf(all, depth);
    if (depth >= MAX_DEPTH) return fc.constantFrom<unknown>(null, 0, '', true);
    switch (s['type']) {
      case 'string':
        return this.string(s);
      case 'integer':
      case 'number':
        return this.number(s);
      case 'boolean':
        return fc.boolean();
      case 'array':
        return this.array(s, depth);
      case 'object':
        return this.object(s, depth);
      default:
        return s['properties'] !== undefined ? this.object(s, depth) : fc.jsonValue({ maxDepth: 2 });
    }
  }

  private allOf(parts: readonly JsonSchema[], depth: number): fc.Arbitrary<unknown> {
    const resolved = parts.map((p) => this.resolve(p));
    if (resolved.length === 1) return this.valueOf(resolved[0] as JsonSchema, depth + 1);
    // Objects merge (the document's one use: a component and the fields an answer adds).
    return fc
      .tuple(...resolved.map((p) => this.valueOf(p, depth + 1)))
      .map((values) => Object.assign({}, ...values.map((v) => (isObject(v) ? v : {}))) as unknown);
  }

  private string(s: JsonSchema): fc.Arbitrary<string> {
    const minLength = typeof s['minLength'] === 'number' ? s['minLength'] : 0;
    const maxLength = Math.min(typeof s['maxLength'] === 'number' ? s['maxLength'] : 40, 200);
    const fits = (v: string): boolean => v.length >= minLength && v.length <= maxLength;
    if (typeof s['pattern'] === 'string')
      // fast-check repeats an unbounded quantifier (`+`, `*`) about 10 times at its default size, so a pattern with a
      // longer minLength would be filtered for ever: draw at a size that reaches it.
      return fc
        .stringMatching(new RegExp(s['pattern']), {
          size: minLength <= 5 ? 'small' : minLength <= 50 ? 'medium' : 'large',
        })
        .map((v) => (v.length > maxLength ? v.slice(0, maxLength) : v))
        .filter(fits);
    return fc.string({ minLength, maxLength: Math.max(minLength, maxLength) });
  }

  private number(s: JsonSchema): fc.Arbitrary<number> {
    const min = typeof s['minimum'] === 'number' ? s['minimum'] : undefined;
    const max = typeof s['maximum'] === 'number' ? s['maximum'] : undefined;
    const exclusiveMin = s['exclusiveMinimum'] === true;
    const exclusiveMax = s['exclusiveMaximum'] === true;
    if (s['type'] === 'integer') {
      const lo = min === undefined ? -1e6 : Math.ceil(exclusiveMin ? min + 1 : min);
      const hi = max === undefined ? lo + 1e6 : Math.floor(exclusiveMax ? max - 1 : max);
      // Both ends and small values near the low end, where most rules bite.
      return fc.oneof(
        fc.constantFrom(lo, hi),
        fc.integer({ min: lo, max: Math.min(hi, lo + 100) }),
        fc.integer({
          min: Math.max(lo, -Number.MAX_SAFE_INTEGER),
          max: Math.min(hi, Number.MAX_SAFE_INTEGER),
        }),
      );
    }
    return fc.double({
      noNaN: true,
      noDefaultInfinity: true,
      ...(min === undefined ? {} : { min, minExcluded: exclusiveMin }),
      ...(max === undefined ? {} : { max, maxExcluded: exclusiveMax }),
    });
  }

  private array(s: JsonSchema, depth: number): fc.Arbitrary<unknown[]> {
    const items = isObject(s['items']) ? s['items'] : {};
    const minLength = typeof s['minItems'] === 'number' ? s['minItems'] : 0;
    const maxLength = Math.max(
      minLength,
      Math.min(typeof s['maxItems'] === 'number' ? s['maxItems'] : MAX_ITEMS, MAX_ITEMS),
    );
    return fc.array(this.valueOf(items, depth + 1), { minLength, maxLength });
  }

  private object(s: JsonSchema, depth: number): fc.Arbitrary<Record<string, unknown>> {
    const properties = isObject(s['properties']) ? s['properties'] : {};
    const required = new Set(Array.isArray(s['required']) ? (s['required'] as string[]) : []);
    const record: Record<string, fc.Arbitrary<unknown>> = {};
    for (const [key, sub] of Object.entries(properties))
      if (isObject(sub)) record[key] = this.valueOf(sub, depth + 1);
    const known = fc.record(record, { requiredKeys: [...required].filter((k) => k in record) });
    const extra = s['additionalProperties'];
    if (extra === false || extra === undefined) return known;
    const extraValue =
      isObject(extra) && Object.keys(extra).length > 0
        ? this.valueOf(extra, depth + 1)
        : fc.jsonValue({ maxDepth: 1 });
    return fc
      .tuple(known, fc.dictionary(fc.string({ minLength: 1, maxLength: 12 }), extraValue, { maxKeys: 3 }))
      .map(([k, more]) => ({ ...more, ...k }));
  }
}

type Path = readonly (string | number)[];

function pathsOf(value: unknown, prefix: Path = [], out: Path[] = []): Path[] {
  out.push(prefix);
  if (out.length > 400) return out;
  if (Array.isArray(value)) value.forEach((v, i) => pathsOf(v, [...prefix, i], out));
  else if (isObject(value)) for (const [k, v] of Object.entries(value)) pathsOf(v, [...prefix, k], out);
  return out;
}

function clone(value: unknown): unknown {
  return value === undefined ? undefined : (JSON.parse(JSON.stringify(value)) as unknown);
}

type Mutation =
  | { readonly kind: 'replace'; readonly at: number; readonly value: unknown }
  | { readonly kind: 'number'; readonly at: number; readonly value: unknown }
  | { readonly kind: 'drop'; readonly at: number }
  | { readonly kind: 'add'; readonly at: number; readonly key: string; readonly value: unknown };

/** Add an own key, `__proto__` too (an assignment to it would set the prototype instead). */
function withKey(target: unknown, key: string, value: unknown): unknown {
  if (isObject(target))
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  return target;
}

/** Numbers where bounds matter most: huge, tiny, past the safe integers, a duration of 40 days, negative. */
const EXTREME_NUMBERS: readonly unknown[] = [
  1e300,
  -1e300,
  3_456_000,
  Number.MAX_SAFE_INTEGER + 2,
  Number.MIN_VALUE,
  1e-300,
  -1,
  0,
  rawLiteral('1e400'),
  '40d',
  '1e300s',
];

function apply(value: unknown, input: Mutation): unknown {
  let paths = pathsOf(value);
  let mutation = input;
  if (mutation.kind === 'number') {
    // A numeric leaf (or a duration string) set to an extreme; any leaf when there is none.
    const numeric = paths.filter((p) => {
      const leaf = p.reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], value);
      return typeof leaf === 'number' || (typeof leaf === 'string' && /^\d+(\.\d+)?[smhdw]?$/.test(leaf));
    });
    if (numeric.length > 0) paths = numeric;
    mutation = { kind: 'replace', at: mutation.at, value: mutation.value };
  }
  const path = paths[mutation.at % paths.length] ?? [];
  if (path.length === 0) {
    if (mutation.kind === 'replace') return mutation.value;
    if (mutation.kind === 'add' && isObject(value))
      return withKey(clone(value), mutation.key, mutation.value);
    return value;
  }
  const root = clone(value);
  let parent: unknown = root;
  for (const key of path.slice(0, -1)) parent = (parent as Record<string | number, unknown>)[key];
  const last = path[path.length - 1] as string | number;
  const container = parent as Record<string | number, unknown>;
  if (mutation.kind === 'replace') {
    if (Array.isArray(container)) container[Number(last)] = mutation.value;
    else withKey(container, String(last), mutation.value);
  } else if (mutation.kind === 'drop') {
    if (Array.isArray(container)) container.splice(Number(last), 1);
    else delete container[last];
  } else {
    const target = container[last];
    if (isObject(target)) withKey(target, mutation.key, mutation.value);
    else if (Array.isArray(target)) target.push(mutation.value);
  }
  return root;
}

/**
 * `value` with one to three near misses: a field replaced by an odd value, a number by an extreme one, a field
 * dropped, or an unknown one added.
 */
export function mutated(value: unknown): fc.Arbitrary<unknown> {
  const mutation: fc.Arbitrary<Mutation> = fc.oneof(
    fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), value: oddValue() }),
    fc.record({
      kind: fc.constant('number' as const),
      at: fc.nat(),
      value: fc.constantFrom(...EXTREME_NUMBERS),
    }),
    fc.record({ kind: fc.constant('drop' as const), at: fc.nat() }),
    fc.record({
      kind: fc.constant('add' as const),
      at: fc.nat(),
      key: fc.constantFrom('__proto__', 'constructor', 'prototype', 'extra', 'Name', 'tasks', ''),
      value: oddValue(),
    }),
  );
  return fc
    .array(mutation, { minLength: 1, maxLength: 3 })
    .map((mutations) => mutations.reduce<unknown>((v, m) => apply(v, m), clone(value)));
}
