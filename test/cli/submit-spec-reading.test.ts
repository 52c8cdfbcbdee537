import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSpecFile } from '../../src/cli/commands/submit.js';
import { ValidationError } from '../../src/core/validation.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';
import { leastMs } from '../helpers/least-ms.js';

/**
 * How `fleetwise submit` reads a spec file before sending it: as the controller reads spec text, once, in time linear
 * in the file (one map of many keys takes about as long as the same keys spread over many files), refusing a repeated
 * key by its line.
 */
const dir = mkdtempSync(join(tmpdir(), 'fleetwise-submit-reading-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const HEAD = `name: wide
team: ml
tasks:
  - name: main
    image: python:3.12-slim
    demand: { any: [0, 1, 1] }
`;

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

async function problemsOf(path: string): Promise<readonly string[]> {
  try {
    await checkSpecFile(path);
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return (e as ValidationError).problems;
  }
  throw new Error('expected the spec file to be refused');
}

/** Keys of the smaller spec, and how many times as many the larger one has. */
const FEW_KEYS = 1_000;
const GROWTH = 12;

/** A spec file whose `queue` map has `keys` keys, and the same with its first key given again at the end. */
interface WideSpec {
  readonly keys: number;
  readonly accepted: string;
  readonly repeated: string;
}

function wideSpec(keys: number): WideSpec {
  const yaml = `${HEAD}queue:\n${Array.from({ length: keys }, (_, i) => `  k${i}: 1\n`).join('')}`;
  return {
    keys,
    accepted: file(`wide-${keys}.yaml`, yaml),
    repeated: file(`repeat-${keys}.yaml`, `${yaml}  k0: 2\n`),
  };
}

describe('a spec file of many keys', () => {
  it('is read in time linear in its keys, accepted or refused for a repeat named by its line', async () => {
    const accepts = (spec: WideSpec) => async (): Promise<void> => {
      const checked = await checkSpecFile(spec.accepted);
      expect(Object.keys(checked.raw['queue'] as object)).toHaveLength(spec.keys);
    };
    const refuses = (spec: WideSpec) => async (): Promise<void> => {
      expect(await problemsOf(spec.repeated)).toEqual([
        `not valid YAML/JSON: the key "k0" is given more than once, again at line ${spec.keys + 8}, column 3`,
      ]);
    };
    const eachOf = (times: number, check: () => Promise<void>) => async (): Promise<void> => {
      for (let i = 0; i < times; i++) await check();
    };
    const few = wideSpec(FEW_KEYS);
    const many = wideSpec(GROWTH * FEW_KEYS);
    // Read once before timing: the first reading also compiles the parser.
    await accepts(few)();
    await refuses(few)();
    // The same number of keys in one map or spread over twelve files, timed in this run whatever the host's speed.
    // Read in linear time, the one map takes about as long as the twelve files (less: each file has fixed costs);
    // comparing each key with every earlier key of its map made it six to eight times as long.
    const ms = await leastMs(
      {
        spreadAccepted: eachOf(GROWTH, accepts(few)),
        oneMapAccepted: accepts(many),
        spreadRefused: eachOf(GROWTH, refuses(few)),
        oneMapRefused: refuses(many),
      },
      2,
    );
    expect(ms.oneMapAccepted / ms.spreadAccepted, JSON.stringify(ms)).toBeLessThan(3);
    expect(ms.oneMapRefused / ms.spreadRefused, JSON.stringify(ms)).toBeLessThan(3);
    // Read quadratically, the one map takes tens of seconds a run: time for the ratio to fail it, not the timeout.
  }, 240_000);

  it('refuses a key repeated in a task or its env, naming the line, and keeps env values as written', async () => {
    expect(
      await problemsOf(file('task.yaml', HEAD.replace('    image:', '    image: a\n    image:'))),
    ).toEqual(['not valid YAML/JSON: the key "image" is given more than once, again at line 6, column 5']);
    const env = `${HEAD}    env:\n      VERSION: 1.10\n      RUN_ID: 007\n`;
    expect(await problemsOf(file('env.yaml', `${env}      VERSION: 2\n`))).toEqual([
      'not valid YAML/JSON: the key "VERSION" is given more than once, again at line 10, column 7',
    ]);
    const checked = await checkSpecFile(file('env-ok.yaml', env));
    expect((checked.raw['tasks'] as { env: unknown }[])[0]?.env).toEqual({ VERSION: '1.10', RUN_ID: '007' });
  });
});

describe('submit --dry-run (CLI subprocess) on a spec repeating a key', () => {
  // A file run alone rebuilds a stale dist/ first, which on a busy machine outlasts the default hook timeout.
  beforeAll(() => ensureBuiltCli(['cli/main.ts']), 180_000);

  it('names the key, its line and column, as JSON and as YAML, and sends nothing', async () => {
    const tasks = '[{"name":"main","image":"python:3.12-slim","demand":{"any":[0,1,1]}}]';
    const json = file('k4.json', `{"name":"a","team":"t","name":"b","tasks":${tasks}}`);
    const yaml = file('k4.yaml', `${HEAD}team: other\n`);
    // No controller listens here: the spec is refused while it is read, before anything is sent.
    const env = { ...process.env, FLEETWISE_SERVER: UNREACHABLE_URL, FLEETWISE_TOKEN: 'unused' };
    const fromJson = await runCli(['submit', '--dry-run', json], env);
    expect(fromJson.code).toBe(2);
    expect(fromJson.stderr).toBe(
      `fleetwise: invalid input: ${json}\n` +
        '  - not valid YAML/JSON: the key "name" is given more than once, again at line 1, column 24\n',
    );
    const fromYaml = await runCli(['submit', '--dry-run', yaml], env);
    expect(fromYaml.code).toBe(2);
    expect(fromYaml.stderr).toBe(
      `fleetwise: invalid input: ${yaml}\n` +
        '  - not valid YAML/JSON: the key "team" is given more than once, again at line 7, column 1\n',
    );
  });
});
