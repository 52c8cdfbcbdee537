import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDocument } from 'yaml';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { parseJobSpec, readSpecText } from '../../src/controller/job-spec/parse.js';
import { ValidationError } from '../../src/core/validation.js';
import { parseDocumentUniqueKeys } from '../../src/core/yaml-unique-keys.js';
import { leastMs } from '../helpers/least-ms.js';
import { catalog, rig } from './controller-fixtures.js';

/**
 * A spec repeating a key is refused, at any depth and with the line of the repeat, and a spec of many keys is read in
 * time linear in its size: the API reads YAML bodies on the controller's event loop, where a check comparing each key
 * with every other held the whole controller for tens of seconds on a few hundred KiB.
 */
const ADMIN = 'job-spec-repeated-keys-admin-token-0123';

const HEAD = `name: twice
team: ml
tasks:
  - name: main
    image: python:3.12-slim
    command: [python, -c, "print(1)"]
    demand: { any: [0, 1, 1] }
`;

/** Specs repeating a key at several depths, with the first line of the problem each is refused with. */
const REPEATS: readonly (readonly [string, string, string])[] = [
  ['at the top', `${HEAD}team: other\n`, 'the key "team" is given more than once, again at line 8, column 1'],
  [
    'in a task',
    HEAD.replace('    image:', '    image: a\n    image:'),
    'the key "image" is given more than once, again at line 6, column 5',
  ],
  [
    'in an env map',
    `${HEAD}    env:\n      A: "1"\n      B: "2"\n      A: "3"\n`,
    'the key "A" is given more than once, again at line 11, column 7',
  ],
  [
    'in a flow map in a demand',
    HEAD.replace('{ any:', '{ any: [0, 1, 1], any:'),
    'the key "any" is given more than once, again at line 7, column 31',
  ],
  [
    'three maps down in queue',
    `${HEAD}queue:\n  x:\n    y: {a: 1, b: 2, a: 3}\n`,
    'the key "a" is given more than once, again at line 10, column 21',
  ],
  [
    'quoted and plain',
    `${HEAD}"team": other\n`,
    'the key "team" is given more than once, again at line 8, column 1',
  ],
  [
    'behind an anchor and a tag',
    `${HEAD}queue:\n  k: 1\n  &a !!str k: 2\n`,
    'the key "k" is given more than once, again at line 10, column 12',
  ],
  [
    'as an explicit key',
    `${HEAD}? name\n: again\n`,
    'the key "name" is given more than once, again at line 8, column 3',
  ],
  [
    'in JSON',
    '{"name":"j","team":"ml","tasks":[{"image":"x","demand":[0,1,1],"env":{"A":"1","A":"2"}}]}',
    'the key "A" is given more than once, again at line 1, column 79',
  ],
];

/** The yaml parser's own first line for a repeated key (which names no key and ends with a colon). */
const PARSER_FIRST_LINE = /^Map keys must be unique at line \d+, column \d+:/;

function problemsOf(text: string): readonly string[] {
  try {
    parseJobSpec(text, 'spec.yaml', catalog);
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return (e as ValidationError).problems;
  }
  throw new Error('expected the spec to be refused');
}

describe('a repeated key', () => {
  it.each(REPEATS)('%s is refused naming its line and column', (_label, text, first) => {
    expect(problemsOf(text)).toEqual([`not valid YAML/JSON: ${first}`]);
  });

  it.each(REPEATS)(
    '%s is placed and quoted as the yaml parser places its own error',
    (_label, text, first) => {
      const own = parseDocument(text, { uniqueKeys: true }).errors;
      const linear = parseDocumentUniqueKeys(text).errors;
      expect(own).toHaveLength(1);
      // The same code, place and quoted source line; only the first line differs, naming the key.
      expect(linear.map((e) => [e.code, e.pos, e.linePos, e.message])).toEqual(
        own.map((e) => [e.code, e.pos, e.linePos, e.message.replace(PARSER_FIRST_LINE, first)]),
      );
    },
  );

  it('names a key that is no string as written, and a long or multi-line key on one line', () => {
    const firstLines = (text: string): string[] =>
      parseDocumentUniqueKeys(text).errors.map((e) => e.message.split('\n')[0] ?? '');
    expect(firstLines('1: a\n0x1: b\n~: c\nnull: d\n')).toEqual([
      'the key 0x1 is given more than once, again at line 2, column 1',
      'the key null is given more than once, again at line 4, column 1',
    ]);
    // 1 and "1" are different keys; "1" is quoted so the two read apart.
    expect(firstLines('"1": a\n1: b\n"1": c\n')).toEqual([
      'the key "1" is given more than once, again at line 3, column 1',
    ]);
    expect(firstLines('"a\\nb": 1\n"a\\nb": 2\n')).toEqual([
      'the key "a\\nb" is given more than once, again at line 2, column 1',
    ]);
    const long = 'k'.repeat(500);
    expect(firstLines(`${long}: 1\n${long}: 2\n`)).toEqual([
      `the key "${'k'.repeat(58)}… is given more than once, again at line 2, column 1`,
    ]);
  });

  it('is reported each time, in the order of the text, beside other syntax errors', () => {
    const text = `${HEAD}queue:\n  a: 1\n  a: 2\n  b: [1\nx: 1\nx: 2\n`;
    const own = parseDocument(text, { uniqueKeys: true }).errors.map((e) => e.message);
    const linear = parseDocumentUniqueKeys(text).errors.map((e) => e.message);
    expect(linear.map((m) => m.split('\n')[0])).toEqual([
      'the key "a" is given more than once, again at line 10, column 3',
      'Flow sequence in block collection must be sufficiently indented and end with a ] at line 12, column 1:',
      'the key "x" is given more than once, again at line 13, column 1',
    ]);
    expect(linear.map((m) => m.replace(/^.*\n/, ''))).toEqual(own.map((m) => m.replace(/^.*\n/, '')));
    // A spec's problems are those first lines, none left ending in the colon that introduced the quote.
    expect(problemsOf(text)).toEqual([
      'not valid YAML/JSON: the key "a" is given more than once, again at line 10, column 3',
      'not valid YAML/JSON: Flow sequence in block collection must be sufficiently indented and end with a ] at ' +
        'line 12, column 1',
      'not valid YAML/JSON: the key "x" is given more than once, again at line 13, column 1',
    ]);
    // Equal keys in different maps, and keys that differ only in type (1 and "1"), are no repeat.
    expect(
      parseDocumentUniqueKeys(`${HEAD}queue:\n  a: {k: 1}\n  b: {k: 1}\n  1: x\n  "1": y\n`).errors,
    ).toEqual([]);
  });
});

describe('many repeats of a key on one line', () => {
  it('tell the first twenty, each quoting its line, and count the rest in one error', () => {
    const repeats = 20_000;
    const flow = `{${Array.from({ length: repeats + 1 }, () => '"a": 1').join(', ')}}`;
    // Quoting the 120 KB line once per repeat took 3.8 s: the line is quoted twenty times now.
    const errors = parseDocumentUniqueKeys(flow).errors;
    expect(errors).toHaveLength(21);
    expect(
      errors
        .slice(0, 20)
        .every((e) =>
          /^the key "a" is given more than once, again at line 1, column \d+\n\n\S/.test(e.message),
        ),
    ).toBe(true);
    expect(errors[20]?.message).toBe('19980 more keys are given more than once, from line 1 on');
  });
});

/** Keys of the wide spec, and into how many specs the same number of keys is spread for comparison. */
const KEYS = 20_000;
const SPREAD = 20;
/** About as many keys as a YAML body may hold (two nodes a key: its line and its `:`). */
const WIDEST = 4_900;

/** The problem of a wide spec whose `k0` is given again after its `keys` keys. */
function repeatedK0(keys: number): string {
  return `not valid YAML/JSON: the key "k0" is given more than once, again at line ${keys + 9}, column 3`;
}

/** A spec whose `queue` map has `keys` keys, as YAML. */
function wideYaml(keys: number): string {
  return `${HEAD.replace('twice', 'wide')}queue:\n${Array.from({ length: keys }, (_, i) => `  k${i}: 1\n`).join('')}`;
}

describe('a spec of many keys', () => {
  let server: ApiServer;
  beforeAll(async () => {
    server = await startApiServer(rig().controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
  });
  afterAll(() => server.close());

  /** A dry run of `text`: the controller's status and answer. */
  async function dryRun(text: string, type: string): Promise<{ status: number; body: unknown }> {
    const response = await fetch(`${server.url}/v1/jobs?dryRun=true`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': type },
      body: text,
    });
    return { status: response.status, body: (await response.json()) as unknown };
  }

  it('is accepted as JSON; as YAML, answered within its limits and read in time linear in its keys', async () => {
    const keys = Array.from({ length: KEYS }, (_, i) => `k${i}`);
    const json = JSON.stringify({
      name: 'wide',
      team: 'ml',
      tasks: [{ name: 'main', image: 'python:3.12-slim', demand: { any: [0, 1, 1] } }],
      queue: Object.fromEntries(keys.map((k) => [k, 1])),
    });
    const yaml = wideYaml(KEYS);
    expect(Buffer.byteLength(yaml)).toBeGreaterThan(200 * 1024);
    const asJson = await dryRun(json, 'application/json');
    expect(asJson.status, JSON.stringify(asJson.body)).toBe(200);
    // Past the YAML limits the API reads it no further, and says to send it as JSON.
    const asYaml = await dryRun(yaml, 'application/yaml');
    expect(asYaml.status, JSON.stringify(asYaml.body)).toBe(413);
    expect(asYaml.body).toMatchObject({ error: expect.stringMatching(/send a larger one as JSON/) });
    // Within them, as wide a map as they allow is read and its repeats named.
    const widest = wideYaml(WIDEST);
    expect((await dryRun(widest, 'application/yaml')).status).toBe(200);
    expect(await dryRun(`${widest}  k0: 2\n`, 'application/yaml')).toMatchObject({
      status: 400,
      body: { details: [repeatedK0(WIDEST)] },
    });

    // The reader itself (which `fleetwise submit` runs on a file of up to 1 MiB) is timed on the wide map.
    const accepts = (text: string) => async (): Promise<void> => {
      readSpecText(text, 'wide.yaml');
    };
    // The last key repeated: the whole map is still read, and the repeat named by its line.
    const refuses = (keyCount: number) => {
      const text = `${wideYaml(keyCount)}  k0: 2\n`;
      return async (): Promise<void> => {
        let problems: readonly string[] | undefined;
        try {
          readSpecText(text, 'wide.yaml');
        } catch (e) {
          problems = e instanceof ValidationError ? e.problems : undefined;
        }
        expect(problems).toEqual([repeatedK0(keyCount)]);
      };
    };
    const eachOf = (times: number, check: () => Promise<void>) => async (): Promise<void> => {
      for (let i = 0; i < times; i++) await check();
    };
    // Read once before timing: the first reading also compiles the parser.
    const few = wideYaml(KEYS / SPREAD);
    await accepts(few)();
    await refuses(KEYS / SPREAD)();
    // The same number of keys in one map or spread over twenty specs, timed in this run whatever the host's speed.
    // Read in linear time, the one map takes about as long as the twenty specs; comparing each key with every
    // earlier key of its map made it five to eight times as long.
    const ms = await leastMs(
      {
        spreadAccepted: eachOf(SPREAD, accepts(few)),
        oneMapAccepted: accepts(yaml),
        spreadRefused: eachOf(SPREAD, refuses(KEYS / SPREAD)),
        oneMapRefused: refuses(KEYS),
      },
      2,
    );
    expect(ms.oneMapAccepted / ms.spreadAccepted, JSON.stringify(ms)).toBeLessThan(3);
    expect(ms.oneMapRefused / ms.spreadRefused, JSON.stringify(ms)).toBeLessThan(3);
    // Read quadratically, the one map takes seconds a run: time for the ratio to fail it, not the timeout.
  }, 240_000);
});
