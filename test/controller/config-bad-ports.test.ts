import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/core/validation.js';
import { loadControllerConfig } from '../../src/controller/config-loading.js';

/**
 * A controller refuses, before it starts, an address its clients could not reach because fetch refuses its port: the
 * API's own (--listen), the one it publishes (--advertise-url) and the one its workers are told (--worker-controller-url).
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-config-bad-ports-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function problems(flags: Record<string, string>): readonly string[] {
  try {
    loadControllerConfig({
      flags: { cluster: 'c', stateDir: join(scratch, 'state'), ...flags },
      env: {},
      defaultRegion: 'us-east-1',
      cwd: scratch,
    });
    return [];
  } catch (e) {
    if (e instanceof ValidationError) return e.problems;
    throw e;
  }
}

const REFUSED = (port: number): string =>
  `port ${port} is one HTTP clients refuse (fetch's bad ports); choose another`;

describe('controller addresses on ports fetch refuses', () => {
  it('refuses --listen on one, in local mode too, naming the flag', () => {
    expect(problems({ listen: '127.0.0.1:6000' })).toEqual([`--listen: ${REFUSED(6000)}`]);
    expect(problems({ provider: 'local', listen: '0.0.0.0:6667' })).toEqual([`--listen: ${REFUSED(6667)}`]);
    expect(problems({ listen: '[::1]:10080' })).toEqual([`--listen: ${REFUSED(10080)}`]);
  });

  it('refuses --advertise-url and --worker-controller-url naming one', () => {
    expect(problems({ listen: '127.0.0.1:7070', advertiseUrl: 'http://box-a:5060' })).toEqual([
      `--advertise-url: ${REFUSED(5060)}`,
    ]);
    expect(
      problems({ provider: 'local', listen: '127.0.0.1:7070', workerControllerUrl: 'http://lb:4190/' }),
    ).toEqual([`--worker-controller-url: ${REFUSED(4190)}`]);
  });

  it('names the file and line of a configured one', () => {
    const path = join(scratch, 'bad-port.yaml');
    writeFileSync(path, 'cluster: c\nstateDir: s\nlisten: 127.0.0.1:6697\n');
    try {
      loadControllerConfig({ flags: { config: path }, env: {}, defaultRegion: 'us-east-1' });
      expect.unreachable('a listen address on a bad port was taken');
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      expect((e as ValidationError).source).toContain(path);
      expect((e as ValidationError).problems).toEqual([`listen (line 3): ${REFUSED(6697)}`]);
    }
  });

  it('takes the ports next to them, a wildcard port and URLs without a port', () => {
    expect(problems({ listen: '127.0.0.1:6001' })).toEqual([]);
    expect(problems({ listen: '127.0.0.1:0' })).toEqual([]);
    expect(
      problems({
        provider: 'local',
        listen: '127.0.0.1:7070',
        advertiseUrl: 'https://fleetwise.example.com',
        workerControllerUrl: 'http://lb:8080',
      }),
    ).toEqual([]);
  });
});
