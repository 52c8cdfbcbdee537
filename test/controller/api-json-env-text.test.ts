import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { jsonEnvNumbersAsWritten } from '../../src/controller/job-spec/env-text.js';
import { ValidationError } from '../../src/core/validation.js';
import { catalog, rig, type Rig } from './controller-fixtures.js';

/**
 * An env value written as a number in a JSON body reaches the task as the text written, as it does from YAML and
 * through `fleetwise submit`: JSON.parse would turn 12345678901234567890 into 12345678901234567000 and 1.10 into 1.1.
 * Through the real controller API over a socket.
 */
const ADMIN = 'api-json-env-text-admin-token-0123456789';

let r: Rig;
let server: ApiServer;
beforeAll(async () => {
  r = rig();
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
});
afterAll(() => server.close());

async function submit(
  text: string,
  type: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${server.url}/v1/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': type },
    body: text,
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

function storedEnv(id: unknown): Record<string, string> | undefined {
  return r.store.listJobs().find((job) => job.id === id)?.spec.tasks[0]?.env;
}

/** Written as numbers, each changes under JSON.parse and String() but for EPOCHS; the rest are not numbers. */
const NUMBERS = '{"E":12345678901234567890,"C":-0,"A":1e21,"V":1.10,"EPOCHS":10,"D":true,"S":"1.10"}';
const WRITTEN = {
  E: '12345678901234567890',
  C: '-0',
  A: '1e21',
  V: '1.10',
  EPOCHS: '10',
  D: 'true',
  S: '1.10',
};

const jsonSpec = (name: string, env: string): string =>
  `{"name":"${name}","team":"ml","tasks":[{"name":"a","image":"busybox:latest","demand":[0,1,1],"env":${env}},` +
  `{"name":"b","image":"busybox:latest","demand":[0,1,1],"env":{"PLAIN":"x"}}]}`;

describe('env numbers in a JSON body', () => {
  it('are kept as written, as the same spec sent as YAML keeps them', async () => {
    const json = await submit(jsonSpec('json-env', NUMBERS), 'application/json');
    expect(json.status, JSON.stringify(json.body)).toBe(201);
    expect(storedEnv(json.body['id'])).toEqual(WRITTEN);
    const yaml = await submit(jsonSpec('yaml-env', NUMBERS), 'application/yaml');
    expect(yaml.status, JSON.stringify(yaml.body)).toBe(201);
    expect(storedEnv(yaml.body['id'])).toEqual(WRITTEN);
    // The other task, whose env has no number, is as it was sent.
    const other = r.store.listJobs().find((job) => job.id === json.body['id'])?.spec.tasks[1];
    expect(other?.env).toEqual({ PLAIN: 'x' });
  });

  it('leave a body without them as JSON.parse read it, reading nothing again', () => {
    const text = jsonSpec('plain', '{"A":"1.10","B":true}');
    const value = JSON.parse(text) as unknown;
    expect(jsonEnvNumbersAsWritten(text, value, 'job spec')).toBe(value);
    const noTasks = { name: 'n', env: { A: 1.5 } };
    expect(jsonEnvNumbersAsWritten(JSON.stringify(noTasks), noTasks, 'job spec')).toBe(noTasks);
  });

  it('are refused, naming the field, in a body larger than the API reads as YAML', () => {
    // Read again as YAML, 1 MiB of JSON held the controller's loop for seconds: past the YAML limit the text is not
    // looked for, and the number must be quoted.
    const big = jsonSpec('big', `{"V":1.10,"PAD":"${'x'.repeat(300 * 1024)}"}`);
    const value = JSON.parse(big) as unknown;
    expect(() => jsonEnvNumbersAsWritten(big, value, 'job spec')).toThrow(
      'tasks.0.env.V: write this value in quotes, as a string',
    );
    const quoted = jsonSpec('big', `{"V":"1.10","PAD":"${'x'.repeat(300 * 1024)}"}`);
    const quotedValue = JSON.parse(quoted) as unknown;
    expect(jsonEnvNumbersAsWritten(quoted, quotedValue, 'job spec')).toBe(quotedValue);
  });

  it('are refused, naming the field, when their written text cannot be found', () => {
    const value = JSON.parse(jsonSpec('lost', '{"V":1.10}')) as unknown;
    // Text that is not the body the value was read from: no number there to keep, so none is passed on changed.
    const refused = (): unknown => jsonEnvNumbersAsWritten('{"tasks": [', value, 'job spec');
    expect(refused).toThrow(ValidationError);
    expect(refused).toThrow(
      'tasks.0.env.V: write this value in quotes, as a string: an environment value is text, and as a JSON number ' +
        'it reads as 1.1, which may not be what was written',
    );
  });
});
