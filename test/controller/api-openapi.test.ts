import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { OPENAPI_DOCUMENT } from '../../src/controller/api/openapi.js';
import { jobSpecComponents } from '../../src/controller/api/openapi-zod-components.js';
import { jobSpecSchema, taskSchema } from '../../src/controller/job-spec/schema.js';

type Json = Readonly<Record<string, unknown>>;

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The document as a client sees it (through JSON), so nothing only a JS object can hold passes. */
const document = JSON.parse(JSON.stringify(OPENAPI_DOCUMENT)) as Json;

function component(doc: Json, name: string): Json {
  const schemas = (doc['components'] as Json)['schemas'] as Json;
  const found = schemas[name];
  if (!isObject(found)) throw new Error(`no component ${name}`);
  return found;
}

/** The value a local `$ref` (`#/a/b`) points at in `doc`, or undefined. */
function resolvePointer(doc: Json, pointer: string): unknown {
  if (!pointer.startsWith('#/')) return undefined;
  let node: unknown = doc;
  for (const raw of pointer.slice(2).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    node = isObject(node) ? node[key] : undefined;
  }
  return node;
}

/** The keywords an OpenAPI 3.0 Schema Object may have (3.0.3 §4.7.24), besides `x-` extensions. */
const SCHEMA_KEYWORDS = new Set([
  '$ref',
  'title',
  'multipleOf',
  'maximum',
  'exclusiveMaximum',
  'minimum',
  'exclusiveMinimum',
  'maxLength',
  'minLength',
  'pattern',
  'maxItems',
  'minItems',
  'uniqueItems',
  'maxProperties',
  'minProperties',
  'required',
  'enum',
  'type',
  'allOf',
  'oneOf',
  'anyOf',
  'not',
  'items',
  'properties',
  'additionalProperties',
  'description',
  'format',
  'default',
  'nullable',
  'discriminator',
  'readOnly',
  'writeOnly',
  'xml',
  'externalDocs',
  'example',
  'deprecated',
]);
const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'array', 'object']);
const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

/** Problems with one Schema Object and the schemas nested in it, each naming where it is. */
function schemaProblems(doc: Json, schema: unknown, at: string): string[] {
  if (!isObject(schema)) return [`${at}: not a schema object`];
  const problems: string[] = [];
  const ref = schema['$ref'];
  if (ref !== undefined) {
    if (typeof ref !== 'string' || !isObject(resolvePointer(doc, ref)))
      problems.push(`${at}: $ref ${String(ref)} does not resolve`);
    // In OpenAPI 3.0 a $ref's siblings are ignored; a description next to one would be lost.
    if (Object.keys(schema).length > 1) problems.push(`${at}: $ref with sibling keywords`);
    return problems;
  }
  for (const key of Object.keys(schema))
    if (!SCHEMA_KEYWORDS.has(key) && !key.startsWith('x-'))
      problems.push(`${at}: not an OpenAPI 3.0 keyword: ${key}`);
  const type = schema['type'];
  if (type !== undefined && !(typeof type === 'string' && TYPES.has(type)))
    problems.push(`${at}: type ${JSON.stringify(type)}`);
  for (const key of ['exclusiveMinimum', 'exclusiveMaximum', 'nullable'])
    if (schema[key] !== undefined && typeof schema[key] !== 'boolean')
      problems.push(`${at}: ${key} not a boolean`);
  if (type === 'array' && schema['items'] === undefined) problems.push(`${at}: an array without items`);
  const required = schema['required'];
  const properties = schema['properties'];
  if (required !== undefined) {
    if (!Array.isArray(required) || required.length === 0 || !required.every((r) => typeof r === 'string'))
      problems.push(`${at}: required is not a non-empty list of names`);
    else if (isObject(properties))
      for (const name of required as string[])
        if (!(name in properties)) problems.push(`${at}: required ${name} is not a property`);
  }
  if (isObject(properties))
    for (const [name, sub] of Object.entries(properties))
      problems.push(...schemaProblems(doc, sub, `${at}.properties.${name}`));
  if (schema['items'] !== undefined) problems.push(...schemaProblems(doc, schema['items'], `${at}.items`));
  const additional = schema['additionalProperties'];
  if (additional !== undefined && typeof additional !== 'boolean')
    problems.push(...schemaProblems(doc, additional, `${at}.additionalProperties`));
  if (schema['not'] !== undefined) problems.push(...schemaProblems(doc, schema['not'], `${at}.not`));
  for (const key of ['allOf', 'oneOf', 'anyOf']) {
    const list = schema[key];
    if (list === undefined) continue;
    if (!Array.isArray(list) || list.length === 0) problems.push(`${at}: ${key} is not a non-empty list`);
    else list.forEach((sub, i) => problems.push(...schemaProblems(doc, sub, `${at}.${key}.${i}`)));
  }
  return problems;
}

function contentProblems(doc: Json, content: unknown, at: string): string[] {
  if (content === undefined) return [];
  if (!isObject(content)) return [`${at}: content is not a map`];
  return Object.entries(content).flatMap(([mediaType, media]) =>
    isObject(media)
      ? schemaProblems(doc, media['schema'], `${at}.${mediaType}`)
      : [`${at}.${mediaType}: not a map`],
  );
}

/** Structural problems of an OpenAPI 3.0 document: what a validator would reject, and refs that do not resolve. */
function documentProblems(doc: Json): string[] {
  const problems: string[] = [];
  if (typeof doc['openapi'] !== 'string' || !/^3\.0\.\d+$/.test(doc['openapi']))
    problems.push('openapi: not 3.0.x');
  const info = doc['info'];
  if (!isObject(info) || typeof info['title'] !== 'string' || typeof info['version'] !== 'string')
    problems.push('info: needs a title and a version');
  const components = doc['components'];
  if (isObject(components) && isObject(components['schemas']))
    for (const [name, schema] of Object.entries(components['schemas']))
      problems.push(...schemaProblems(doc, schema, `components.schemas.${name}`));
  else problems.push('components.schemas: missing');
  const operationIds = new Set<string>();
  const paths = doc['paths'];
  if (!isObject(paths)) return [...problems, 'paths: missing'];
  for (const [path, operations] of Object.entries(paths)) {
    if (!path.startsWith('/')) problems.push(`${path}: does not start with /`);
    if (!isObject(operations)) {
      problems.push(`${path}: not a map of operations`);
      continue;
    }
    const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] as string);
    for (const [method, operation] of Object.entries(operations)) {
      const at = `${method} ${path}`;
      if (!METHODS.has(method) || !isObject(operation)) {
        problems.push(`${at}: not an operation`);
        continue;
      }
      const id = operation['operationId'];
      if (typeof id === 'string') {
        if (operationIds.has(id)) problems.push(`${at}: operationId ${id} used twice`);
        operationIds.add(id);
      }
      const parameters = (operation['parameters'] ?? []) as unknown[];
      for (const [i, p] of parameters.entries()) {
        if (
          !isObject(p) ||
          typeof p['name'] !== 'string' ||
          !['query', 'header', 'path', 'cookie'].includes(String(p['in']))
        )
          problems.push(`${at}: parameter ${i} needs a name and a location`);
        else problems.push(...schemaProblems(doc, p['schema'], `${at} parameter ${p['name']}`));
      }
      for (const name of templated)
        if (
          !parameters.some(
            (p) => isObject(p) && p['in'] === 'path' && p['name'] === name && p['required'] === true,
          )
        )
          problems.push(`${at}: path parameter ${name} is not declared as required`);
      const body = operation['requestBody'];
      if (body !== undefined)
        problems.push(
          ...(isObject(body)
            ? contentProblems(doc, body['content'], `${at} requestBody`)
            : [`${at}: requestBody`]),
        );
      const responses = operation['responses'];
      if (!isObject(responses) || Object.keys(responses).length === 0) {
        problems.push(`${at}: no responses`);
        continue;
      }
      for (const [status, response] of Object.entries(responses)) {
        if (!/^([1-5]\d\d|[1-5]XX|default)$/.test(status)) problems.push(`${at}: status ${status}`);
        if (!isObject(response) || typeof response['description'] !== 'string')
          problems.push(`${at} ${status}: a response needs a description`);
        else problems.push(...contentProblems(doc, response['content'], `${at} ${status}`));
      }
    }
  }
  return problems;
}

describe('OpenAPI document', () => {
  it('is a structurally valid OpenAPI 3.0 document whose $refs all resolve', () => {
    expect(documentProblems(document)).toEqual([]);
  });

  it('the structure check finds what it should', () => {
    const broken = {
      openapi: '3.1.0',
      info: { title: 't' },
      components: {
        schemas: {
          A: { type: ['string', 'null'], const: 1, properties: { b: { $ref: '#/components/schemas/B' } } },
          C: { type: 'array', required: ['x'], properties: {} },
        },
      },
      paths: { '/x/{id}': { get: { responses: {} } }, '/y': { post: { responses: { '200': {} } } } },
    };
    expect(documentProblems(broken)).toEqual([
      'openapi: not 3.0.x',
      'info: needs a title and a version',
      'components.schemas.A: not an OpenAPI 3.0 keyword: const',
      'components.schemas.A: type ["string","null"]',
      'components.schemas.A.properties.b: $ref #/components/schemas/B does not resolve',
      'components.schemas.C: an array without items',
      'components.schemas.C: required x is not a property',
      'get /x/{id}: path parameter id is not declared as required',
      'get /x/{id}: no responses',
      'post /y 200: a response needs a description',
    ]);
  });

  it('documents every field of the job spec schema, and of its task schema', () => {
    const spec = component(document, 'JobSpec');
    expect(Object.keys(spec['properties'] as Json).sort()).toEqual(Object.keys(jobSpecSchema.shape).sort());
    const items = (spec['properties'] as Json)['tasks'] as Json;
    const task = resolvePointer(document, (items['items'] as Json)['$ref'] as string) as Json;
    expect(Object.keys(task['properties'] as Json).sort()).toEqual(Object.keys(taskSchema.shape).sort());
    // A team token may leave out the team; fields with defaults are optional in what a client sends.
    expect(spec['required']).toEqual(['name', 'tasks']);
    expect(task['required']).toEqual(['demand']);
    expect(spec['additionalProperties']).toBe(false);
  });

  it('documents retryStrategy from its schema: attempts 1–10, exit rules with their glob and actions', () => {
    const retry = (component(document, 'JobSpec')['properties'] as Json)['retryStrategy'] as Json;
    expect(retry['description']).toMatch(/AWS Batch retryStrategy/);
    const attempts = (retry['properties'] as Json)['attempts'] as Json;
    expect(attempts).toMatchObject({ type: 'integer', minimum: 1, maximum: 10, default: 1 });
    const rules = (retry['properties'] as Json)['evaluateOnExit'] as Json;
    const rule = (rules['items'] as Json)['properties'] as Json;
    expect(JSON.stringify(rule['onExitCode'])).toContain('^[0-9*]+$');
    expect(JSON.stringify(rule['action'])).toContain('"retry","exit"');
    expect(documentProblems(document)).toEqual([]);
  });

  it('a field added to the job spec schema appears in the document with no other change', () => {
    const extended = jobSpecSchema.extend({
      maxCostDollars: z.number().positive().describe('Stop the job once it has cost this much').optional(),
    });
    const components = document['components'] as Json;
    const schemas = { ...(components['schemas'] as Json), ...jobSpecComponents(extended) };
    const generated = { ...document, components: { ...components, schemas } };
    expect((component(generated, 'JobSpec')['properties'] as Json)['maxCostDollars']).toEqual({
      type: 'number',
      minimum: 0,
      exclusiveMinimum: true,
      description: 'Stop the job once it has cost this much',
    });
    expect(documentProblems(generated)).toEqual([]);
  });
});
