import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSpecFile } from '../../src/cli/commands/submit.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import { ValidationError } from '../../src/core/validation.js';
import { catalog } from '../controller/controller-fixtures.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

/**
 * How `fleetwise submit` reads a spec file before sending it: as the controller reads spec text, once, in time linear
 * in the file (a map of many keys is no slower than the same spec as JSON values), refusing a repeated key by its line.
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

describe('a spec file of many keys', () => {
  it('is checked about as soon as the same spec is validated as JSON values, and a repeat is refused', async () => {
    const keys = Array.from({ length: 20_000 }, (_, i) => `k${i}`);
    const yaml = `${HEAD}queue:\n${keys.map((k) => `  ${k}: 1\n`).join('')}`;
    const json = JSON.stringify({
      name: 'wide',
      team: 'ml',
      tasks: [{ name: 'main', image: 'python:3.12-slim', demand: { any: [0, 1, 1] } }],
      queue: Object.fromEntries(keys.map((k) => [k, 1])),
    });
    const jsonStart = performance.now();
    validateJobSpec(JSON.parse(json) as unknown, 'spec.json', catalog);
    const jsonMs = performance.now() - jsonStart;

    const start = performance.now();
    const checked = await checkSpecFile(file('wide.yaml', yaml));
    expect(performance.now() - start).toBeLessThan(20 * jsonMs + 1000);
    expect(Object.keys(checked.raw['queue'] as object)).toHaveLength(keys.length);

    const repeatStart = performance.now();
    expect(await problemsOf(file('repeat.yaml', `${yaml}  k0: 2\n`))).toEqual([
      `not valid YAML/JSON: the key "k0" is given more than once, again at line ${keys.length + 8}, column 3`,
    ]);
    expect(performance.now() - repeatStart).toBeLessThan(20 * jsonMs + 1000);
  });

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
