import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { OPENAPI_DOCUMENT, openApiPath } from '../../src/controller/api/openapi.js';
import { FencedWriteError } from '../../src/controller/ha/lease.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import type { CostReport } from '../../src/controller/service.js';
import type { JobRecord } from '../../src/controller/state-store.js';
import { ADMIN_TOKEN, FakeControllerService, VISION_TOKEN } from './api-fake-service.js';
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

/** Problems with `value` as an answer described by `schema`, each naming where; `at` is the JSON path so far. */
function valueProblems(doc: Json, schema: unknown, value: unknown, at: string, keysChecked = true): string[] {
  const resolved = resolved$(doc, schema);
  if (!isObject(resolved)) return [`${at}: no schema`];
  if (value === null) return resolved['nullable'] === true ? [] : [`${at}: null, not nullable`];
  const problems: string[] = [];
  for (const sub of (resolved['allOf'] ?? []) as unknown[])
    problems.push(...valueProblems(doc, sub, value, at, false));
  for (const key of ['oneOf', 'anyOf']) {
    const list = resolved[key] as unknown[] | undefined;
    if (list !== undefined && !list.some((sub) => valueProblems(doc, sub, value, at).length === 0))
      problems.push(`${at}: matches none of ${key}`);
  }
  const type = resolved['type'];
  const actual = Array.isArray(value) ? 'array' : typeof value;
  if (type === 'integer' ? !Number.isInteger(value) : type !== undefined && type !== actual)
    return [...problems, `${at}: ${actual}, expected ${String(type)}`];
  const allowed = resolved['enum'] as unknown[] | undefined;
  if (allowed !== undefined && !allowed.includes(value))
    problems.push(`${at}: ${JSON.stringify(value)} not in enum`);
  if (Array.isArray(value) && resolved['items'] !== undefined)
    value.forEach((item, i) => problems.push(...valueProblems(doc, resolved['items'], item, `${at}[${i}]`)));
  if (isObject(value)) {
    const properties = (resolved['properties'] ?? {}) as Json;
    for (const name of (resolved['required'] ?? []) as string[])
      if (!(name in value)) problems.push(`${at}: required ${name} missing`);
    const documented = keysChecked ? documentedKeys(doc, resolved) : undefined;
    const additional = resolved['additionalProperties'];
    for (const [name, field] of Object.entries(value)) {
      if (name in properties) problems.push(...valueProblems(doc, properties[name], field, `${at}.${name}`));
      else if (isObject(additional)) problems.push(...valueProblems(doc, additional, field, `${at}.${name}`));
      else if (documented !== undefined && !documented.has(name))
        problems.push(`${at}.${name}: undocumented`);
    }
  }
  return problems;
}

function resolved$(doc: Json, schema: unknown): unknown {
  let node = schema;
  while (isObject(node) && typeof node['$ref'] === 'string') node = resolvePointer(doc, node['$ref']);
  return node;
}

/**
 * The fields an object schema names (with those of its allOf parts), or undefined when it leaves its fields open (no
 * `properties`, or `additionalProperties` allowed): an answer's field outside the set is undocumented.
 */
function documentedKeys(doc: Json, schema: unknown): Set<string> | undefined {
  const resolved = resolved$(doc, schema);
  if (!isObject(resolved)) return undefined;
  const parts = (resolved['allOf'] ?? []) as unknown[];
  const properties = resolved['properties'];
  if (parts.length === 0 && (!isObject(properties) || resolved['additionalProperties'] !== undefined))
    return resolved['additionalProperties'] === false && isObject(properties)
      ? new Set(Object.keys(properties))
      : undefined;
  const keys = new Set(isObject(properties) ? Object.keys(properties) : []);
  for (const part of parts) {
    const named = documentedKeys(doc, part);
    if (named === undefined) return undefined;
    for (const key of named) keys.add(key);
  }
  return keys;
}

describe('OpenAPI document against real answers', () => {
  /** A controller whose report writes fail on request, whose cost lines are the accounting's, that ends jobs. */
  class ReadService extends FakeControllerService {
    failReports = false;
    override costs(sinceSeconds = 0, untilSeconds?: number): CostReport {
      const report = super.costs(sinceSeconds, untilSeconds);
      return {
        ...report,
        byJob: report.byJob.map((j) => ({ ...j, migrationCost: 0 })),
        byInstance: report.byInstance.map((i) => ({ ...i, billedSeconds: 3600 })),
      };
    }
    override async writeReport(): Promise<string> {
      if (this.failReports) throw new Error('AccessDenied: s3:PutObject');
      return super.writeReport();
    }
    markUnsuccessful = (id: string): JobRecord => this.store.setJobState(id, 'unsuccessful', 'test');
  }
  const service = new ReadService();
  service.store.addTeamToken('vision', VISION_TOKEN, 'test');
  let server: ApiServer;

  beforeAll(async () => {
    server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
    const spec = readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml'), 'utf8');
    const submitted = await fetch(`${server.url}/v1/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${VISION_TOKEN}`, 'content-type': 'application/yaml' },
      body: spec,
    });
    expect(submitted.status).toBe(201);
  });
  afterAll(async () => {
    await server.close();
  });

  interface Asked {
    readonly method: 'GET' | 'POST';
    /** As sent (percent-encoding left as written). */
    readonly path: string;
    /** The documented path it is an operation of. */
    readonly operation: string;
    readonly token?: string | null;
    readonly body?: string;
    readonly contentType?: string;
    readonly status: number;
  }

  /** Ask, and check the answer's status is documented for the operation and its body is as documented. */
  async function conforms(asked: Asked): Promise<Response> {
    const token = asked.token === undefined ? ADMIN_TOKEN : asked.token;
    const response = await fetch(`${server.url}${asked.path}`, {
      method: asked.method,
      headers: {
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        ...(asked.contentType === undefined ? {} : { 'content-type': asked.contentType }),
      },
      ...(asked.body === undefined ? {} : { body: asked.body }),
    });
    const text = await response.text();
    const what = `${asked.method} ${asked.path} => ${response.status} ${text.slice(0, 300)}`;
    expect(response.status, what).toBe(asked.status);
    const operation = ((document['paths'] as Json)[asked.operation] as Json)[
      asked.method.toLowerCase()
    ] as Json;
    const documented = (operation['responses'] as Json)[String(response.status)];
    expect(isObject(documented), `${what}: status undocumented`).toBe(true);
    const content = (documented as Json)['content'] as Json;
    const type = response.headers.get('content-type') ?? '';
    if (type.startsWith('application/json')) {
      const media = content['application/json'];
      expect(isObject(media), `${what}: JSON undocumented`).toBe(true);
      expect(valueProblems(document, (media as Json)['schema'], JSON.parse(text), '$'), what).toEqual([]);
    }
    return response;
  }

  it('the value check finds a wrong type, a missing field and an undocumented one', () => {
    const schema = {
      type: 'object',
      required: ['a'],
      properties: { a: { type: 'integer' }, b: { type: 'string' } },
    };
    expect(valueProblems(document, schema, { a: 1.5, c: 1 }, '$')).toEqual([
      '$.a: number, expected integer',
      '$.c: undocumented',
    ]);
    expect(valueProblems(document, schema, { b: 'x' }, '$')).toEqual(['$: required a missing']);
  });

  it('documents the 400s of a bad query or path id, on the routes that answer them', async () => {
    await conforms({
      method: 'GET',
      path: '/v1/jobs/job-1/why?limit=0',
      operation: '/v1/jobs/{id}/why',
      status: 400,
    });
    await conforms({
      method: 'GET',
      path: '/v1/tokens?team=Bad%20Team',
      operation: '/v1/tokens',
      status: 400,
    });
    await conforms({
      method: 'POST',
      path: '/v1/tokens/ABC/revoke',
      operation: '/v1/tokens/{id}/revoke',
      status: 400,
    });
    for (const operation of Object.keys(document['paths'] as Json).filter((p) => p.includes('{id}')))
      for (const method of Object.keys((document['paths'] as Json)[operation] as Json)) {
        const verb = method.toUpperCase() as 'GET' | 'POST';
        await conforms({ method: verb, path: operation.replace('{id}', '%zz'), operation, status: 400 });
        await conforms({
          method: verb,
          path: operation.replace('{id}', 'x'.repeat(129)),
          operation,
          status: 414,
        });
      }
  });

  it('documents the 400 of an unknown query parameter on every route the server serves', async () => {
    expect(server.routes.length).toBeGreaterThan(20);
    for (const route of server.routes) {
      const path = route.url.replace(/:[A-Za-z0-9_]+/g, 'x');
      await conforms({
        method: route.method === 'GET' ? 'GET' : 'POST',
        path: `${path}?unknownParameter=1`,
        operation: openApiPath(route.url),
        status: 400,
      });
    }
  });

  it('documents the 415s of a body of a type the route does not take', async () => {
    const yaml = { body: 'team: x\n', contentType: 'application/yaml', status: 415 } as const;
    await conforms({ method: 'POST', path: '/v1/tokens', operation: '/v1/tokens', ...yaml });
    await conforms({
      method: 'POST',
      path: '/v1/jobs/job-1/unsuccessful',
      operation: '/v1/jobs/{id}/unsuccessful',
      token: VISION_TOKEN,
      ...yaml,
    });
    await conforms({
      method: 'POST',
      path: '/v1/jobs/job-1/cancel',
      operation: '/v1/jobs/{id}/cancel',
      token: VISION_TOKEN,
      body: 'not really a tar',
      contentType: 'application/x-tar',
      status: 415,
    });
  });

  it('documents a 503 with its Retry-After on every operation, as a fenced-out controller answers it', async () => {
    for (const [path, operations] of Object.entries(document['paths'] as Json))
      for (const [method, operation] of Object.entries(operations as Json)) {
        const unavailable = ((operation as Json)['responses'] as Json)['503'];
        expect(isObject(unavailable), `${method} ${path}: no 503`).toBe(true);
      }
    const listJobs = service.store.listJobs.bind(service.store);
    service.store.listJobs = () => {
      throw new FencedWriteError(2, 3);
    };
    try {
      const response = await conforms({
        method: 'GET',
        path: '/v1/jobs',
        operation: '/v1/jobs',
        status: 503,
      });
      const documented = (((document['paths'] as Json)['/v1/jobs'] as Json)['get'] as Json)[
        'responses'
      ] as Json;
      expect(response.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(Object.keys(((documented['503'] as Json)['headers'] as Json) ?? {})).toEqual(['Retry-After']);
    } finally {
      service.store.listJobs = listJobs;
    }
  });

  it('documents the 500 of a report that could not be written', async () => {
    service.failReports = true;
    try {
      await conforms({ method: 'POST', path: '/v1/reports', operation: '/v1/reports', status: 500 });
    } finally {
      service.failReports = false;
    }
    await conforms({ method: 'POST', path: '/v1/reports', operation: '/v1/reports', status: 201 });
  });

  it('documents every field of the cost lines and of the job listing', async () => {
    await conforms({ method: 'GET', path: '/v1/costs', operation: '/v1/costs', status: 200 });
    await conforms({
      method: 'GET',
      path: '/v1/costs',
      operation: '/v1/costs',
      token: VISION_TOKEN,
      status: 200,
    });
    await conforms({
      method: 'GET',
      path: '/v1/jobs?withCost=true&limit=1',
      operation: '/v1/jobs',
      status: 200,
    });
  });

  it('a 401 challenges for a bearer token (RFC 6750), as documented', async () => {
    for (const token of [null, 'not-a-token-0123456789']) {
      const answer = await conforms({
        method: 'GET',
        path: '/v1/jobs',
        operation: '/v1/jobs',
        token,
        status: 401,
      });
      expect(answer.headers.get('www-authenticate')).toBe('Bearer realm="fleetwise"');
    }
    const paths = document['paths'] as Json;
    for (const [path, operations] of Object.entries(paths))
      for (const [method, operation] of Object.entries(operations as Json)) {
        const unauthorized = ((operation as Json)['responses'] as Json)['401'];
        if (unauthorized === undefined) continue;
        expect(Object.keys(((unauthorized as Json)['headers'] ?? {}) as Json), `${method} ${path}`).toEqual([
          'WWW-Authenticate',
        ]);
      }
  });
});
