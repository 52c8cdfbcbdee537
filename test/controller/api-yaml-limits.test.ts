import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { readSpecText } from '../../src/controller/job-spec/parse.js';
import { ValidationError } from '../../src/core/validation.js';
import { fakeWithTeams, VISION_TOKEN } from './api-fake-service.js';

/**
 * YAML bodies are read within limits of their own, far below JSON's: the YAML parser takes microseconds a node on the
 * controller's event loop (1 MiB of it held every request and heartbeat for seconds), so a larger spec is refused
 * with a 413 that says to send it as JSON. Nesting the parser would recurse into past its stack is refused before it
 * reads a byte, however the text hides it.
 */

let server: ApiServer;

beforeAll(async () => {
  server = await startApiServer(fakeWithTeams(), {
    listen: '127.0.0.1:0',
    adminToken: 'yaml-limits-admin-token-01',
  });
});
afterAll(async () => {
  await server.close();
});

interface Answer {
  readonly status: number;
  readonly body: { readonly error?: string; readonly details?: readonly string[] };
}

async function dryRun(body: string, contentType = 'application/yaml'): Promise<Answer> {
  const response = await fetch(`${server.url}/v1/jobs?dryRun=true`, {
    method: 'POST',
    headers: { authorization: `Bearer ${VISION_TOKEN}`, 'content-type': contentType },
    body,
  });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

interface Task {
  readonly name: string;
  readonly image: string;
  readonly command?: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  readonly demand: { readonly any: readonly [number, number, number] };
}

/** A valid spec of `tasks`, as JSON and as YAML. */
function spec(tasks: readonly Task[]): { readonly json: string; readonly yaml: string } {
  const yamlTask = (t: Task): string =>
    `  - name: ${t.name}\n    image: ${t.image}\n    demand:\n      any: [${t.demand.any.join(', ')}]\n` +
    (t.command === undefined ? '' : `    command:\n${t.command.map((a) => `      - '${a}'\n`).join('')}`) +
    (t.env === undefined
      ? ''
      : `    env:\n${Object.entries(t.env)
          .map(([k, v]) => `      ${k}: '${v}'\n`)
          .join('')}`);
  return {
    json: JSON.stringify({ name: 'big', team: 'vision', tasks }),
    yaml: `name: big\nteam: vision\ntasks:\n${tasks.map(yamlTask).join('')}`,
  };
}

const task = (i: number, extra: Partial<Task>): Task => ({
  name: `task-${i}`,
  image: 'python:3.12-slim',
  demand: { any: [0, 0.5, 0.25] },
  ...extra,
});

/** The YAML byte limit (job-spec/spec.ts maxYamlSpecBytes), as the answers name it. */
const YAML_BYTES = 256 * 1024;
const TOO_LARGE = new RegExp(
  '^this YAML body .*: YAML is taken up to 256 KiB and 10000 nodes; send a larger one as JSON ' +
    '\\(Content-Type: application/json\\), taken up to 1 MiB$',
);

describe('YAML bodies past their limits', () => {
  it('a valid spec larger than the YAML byte limit is a 413 saying to send JSON, which takes it', async () => {
    // Five tasks of a 60 KB command each: few nodes, 300 KB.
    const { json, yaml } = spec(
      Array.from({ length: 5 }, (_, i) => task(i, { command: ['x'.repeat(60_000)] })),
    );
    expect(Buffer.byteLength(yaml)).toBeGreaterThan(YAML_BYTES);
    const asYaml = await dryRun(yaml);
    expect(asYaml.status, JSON.stringify(asYaml.body)).toBe(413);
    expect(asYaml.body.error).toMatch(/^this YAML body is larger than 256 KiB: /);
    expect(asYaml.body.error).toMatch(TOO_LARGE);
    const asJson = await dryRun(json, 'application/json');
    expect(asJson.status, JSON.stringify(asJson.body)).toBe(200);
  });

  it('a valid spec of more nodes than YAML is taken with is a 413 saying to send JSON, which takes it', async () => {
    // 64 tasks of 100 env vars: a line and a `:` each, 12,800 nodes in 120 KB.
    const env = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`VAR_${i}`, `v${i}`]));
    const { json, yaml } = spec(Array.from({ length: 64 }, (_, i) => task(i, { env })));
    expect(Buffer.byteLength(yaml)).toBeLessThan(YAML_BYTES);
    const asYaml = await dryRun(yaml);
    expect(asYaml.status, JSON.stringify(asYaml.body)).toBe(413);
    expect(asYaml.body.error).toMatch(/^this YAML body holds more than 10000 nodes \(lines, keys, items\): /);
    expect(asYaml.body.error).toMatch(TOO_LARGE);
    const asJson = await dryRun(json, 'application/json');
    expect(asJson.status, JSON.stringify(asJson.body)).toBe(200);
  });

  it('a large spec within the limits is taken as YAML: 64 tasks of 20 env vars and a 1 KB command each', async () => {
    const env = Object.fromEntries(
      Array.from({ length: 20 }, (_, i) => [`VARIABLE_${i}`, `a value of ${i}`]),
    );
    const command = Array.from({ length: 15 }, (_, i) => `--option-${i}=${'x'.repeat(60)}`);
    const { yaml } = spec(Array.from({ length: 64 }, (_, i) => task(i, { env, command })));
    expect(Buffer.byteLength(yaml)).toBeGreaterThan(120 * 1024);
    const answer = await dryRun(yaml);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  });

  it('a megabyte of nested flow sequences is refused unread, by its size or its nodes', async () => {
    for (const body of [`x: [${'[],'.repeat(330_000)}]\n`, `x: [${'[],'.repeat(70_000)}]\n`]) {
      const answer = await dryRun(body);
      expect(answer.status, JSON.stringify(answer.body)).toBe(413);
      expect(answer.body.error).toMatch(TOO_LARGE);
    }
  });

  it('a line of thousands of errors is answered with the first twenty and a count of the rest', async () => {
    // Each `!a` is an error of its own; the parser quoting the whole line for each took time quadratic in it.
    const answer = await dryRun(`name: x\ndescription: ${'!a '.repeat(4_000)}1\n`);
    expect(answer.status, JSON.stringify(answer.body).slice(0, 300)).toBe(400);
    const details = answer.body.details ?? [];
    expect(details).toHaveLength(21);
    expect(details[0]).toMatch(/^not valid YAML\/JSON: .* at line 2, column \d+$/);
    expect(details[20]).toBe('not valid YAML/JSON: 3979 more errors after these');
  });
});

describe('YAML nested past the depth limit, however it is written', () => {
  // As deep as a YAML body's 10,000 nodes let it be: each bracket, `? ` or `: ` is one.
  const DEEP = 4_900;
  const hidden: readonly (readonly [string, string])[] = [
    // A quote inside a plain scalar is no quote: the brackets after it nest.
    ['a quote in a plain scalar of a flow sequence', `x: [a', ${'['.repeat(DEEP)}${']'.repeat(DEEP)}]\n`],
    ['a quote after a blank in a plain scalar', `x: [a 'b, ${'['.repeat(DEEP)}${']'.repeat(DEEP)}]\n`],
    ['an escaped quote in a double-quoted scalar', `x: ["a\\" ", ${'['.repeat(DEEP)}${']'.repeat(DEEP)}]\n`],
    ['a plain scalar continued on the next line', `x: [a\n 'b, ${'['.repeat(DEEP)}${']'.repeat(DEEP)}]\n`],
    ['explicit keys', `x: ${'? '.repeat(DEEP)}a\n`],
    ['an explicit value of compact sequences', `? a\n: ${'- '.repeat(DEEP)}a\n`],
    ['pairs in a flow sequence', `x: [${'a: '.repeat(DEEP)}a]\n`],
  ];
  it.each(hidden)('%s is a 400 saying so, before the YAML parser reads it', async (_, body) => {
    const answer = await dryRun(body);
    expect(answer.status, JSON.stringify(answer.body).slice(0, 300)).toBe(400);
    expect(answer.body).toEqual({
      error: 'invalid job spec',
      details: [expect.stringMatching(/^(x|\(root\)): nested deeper than 64 levels \(line \d+\)$/)],
    });
  });

  it('brackets in quoted and block scalars do not count', async () => {
    const brackets = '['.repeat(70);
    const body =
      `name: quoted\nteam: vision\ntasks:\n  - name: main\n    image: python:3.12-slim\n` +
      `    command: [sh, -c, "echo '${brackets}' \\"${brackets}\\"", 'it''s ${brackets}']\n` +
      `    env:\n      SCRIPT: |\n        ${brackets}\n        ${brackets}\n` +
      `    demand: { any: [0, 0.5, 0.25] }\n`;
    const answer = await dryRun(body);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  });

  it('a file read by the CLI that overflows the YAML parser is refused as too deep', () => {
    // `fleetwise submit` reads a local file without the API's depth check: the parser's stack overflow says so.
    let problems: readonly string[] | undefined;
    try {
      readSpecText(`x: ${'['.repeat(20_000)}${']'.repeat(20_000)}\n`, 'deep.yaml');
    } catch (e) {
      problems = e instanceof ValidationError ? e.problems : [String(e)];
    }
    expect(problems).toEqual(['(root): nested deeper than 64 levels (line 1)']);
  });
});
