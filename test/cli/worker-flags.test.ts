import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runWorker } from '../../src/cli/commands/worker.js';
import { ValidationError } from '../../src/core/validation.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

/** `fleetwise worker`'s latency-probe flags are checked before the worker starts anything, naming the flag. */
describe('fleetwise worker: latency probe flags', () => {
  const base = {
    controller: UNREACHABLE_URL,
    token: 'worker-token-0123456789',
    instanceId: 'local-x',
    executor: 'process',
  };

  it.each<[string, Record<string, string>, RegExp]>([
    ['a port above 65535', { probePort: '70000' }, /--probe-port: 0 \(any free port\) to 65535/],
    ['a port that is not a number', { probePort: 'seventy' }, /--probe-port/],
    ['an address with a space', { probeHost: 'a b' }, /--probe-host: an IP address or a host name/],
    // Peers connect to the host as given: `[fd00::5]` would pass here and fail every probe of it.
    [
      'an IPv6 address in brackets',
      { probeHost: '[fd00::5]' },
      /--probe-host: give an IPv6 address without brackets/,
    ],
    ['a probe interval of 0', { probeIntervalSeconds: '0' }, /--probe-interval-seconds: at least 0\.05 s/],
    ['a window over an hour', { probeWindowSeconds: '7200' }, /--probe-window-seconds: at most an hour/],
    // The window must hold the last probe at every heartbeat, or the measured pairs vanish between probes.
    [
      'a window shorter than the probe interval',
      { probeIntervalSeconds: '120', probeWindowSeconds: '60' },
      /--probe-window-seconds: must be at least --probe-interval-seconds/,
    ],
    [
      'a window shorter than the default probe interval',
      { probeWindowSeconds: '5' },
      /--probe-window-seconds: must be at least --probe-interval-seconds/,
    ],
    // Probed less often than the controller keeps round trips fresh, they would reach its plans stale.
    [
      "a probe interval over the controller's staleness limit",
      { probeIntervalSeconds: '600', probeWindowSeconds: '600' },
      /--probe-interval-seconds: at most 300 s/,
    ],
  ])('refuses %s', async (_label, flags, reason) => {
    const error = await runWorker({ ...base, ...flags }, {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).message + (error as ValidationError).problems.join('\n')).toMatch(
      reason,
    );
  });
});

/**
 * A bad flag is named before the worker looks for a credential or makes its work directory: without the flags checked
 * first, a worker started by hand without one would hide the flag's mistake behind the credential's.
 */
describe('fleetwise worker: flags first, each named', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-worker-flags-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
  const withoutCredential = {
    controller: UNREACHABLE_URL,
    instanceId: 'local-x',
    executor: 'process',
    workDir: join(scratch, 'work'),
  };

  async function refusal(flags: Parameters<typeof runWorker>[0]): Promise<ValidationError> {
    const error = await runWorker(flags, {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    return error as ValidationError;
  }

  it("a controller on one of fetch's bad ports, with no credential to register with", async () => {
    // fetch would refuse every registration without connecting: the worker would only ever give up.
    const error = await refusal({ ...withoutCredential, controller: 'http://127.0.0.1:6666' });
    expect(error.problems).toEqual([
      "--controller: port 6666 is one HTTP clients refuse (fetch's bad ports); choose another",
    ]);
  });

  it('a bad probe port, with no credential to register with', async () => {
    const error = await refusal({ ...withoutCredential, probePort: '70000' });
    expect(error.problems).toEqual(['--probe-port: 0 (any free port) to 65535']);
  });

  it('an empty or blank instance id', async () => {
    for (const instanceId of ['', '  ']) {
      const error = await refusal({ ...withoutCredential, instanceId });
      expect(error.problems).toEqual([
        "--instance-id: empty: give this instance's cloud id (EC2 i-…, local-…)",
      ]);
    }
  });

  it('a work directory that is a file, or under one, with a credential given', async () => {
    const file = join(scratch, 'a-file');
    writeFileSync(file, 'not a directory');
    for (const workDir of [file, join(file, 'below')]) {
      const error = await refusal({ ...withoutCredential, token: 'worker-token-0123456789', workDir });
      expect(error.source).toBe('--work-dir');
      expect(error.problems).toEqual([
        `${workDir} is a file, or a path through one, not a directory: give a directory (created if missing) for the worker's state`,
      ]);
    }
  });

  it('a spot notice poll period from the environment, named by its variable; set but empty, it is unset', async () => {
    const fromEnv = async (value: string): Promise<ValidationError> => {
      const error = await runWorker(withoutCredential, { FLEETWISE_NOTICE_POLL_SECONDS: value }).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ValidationError);
      return error as ValidationError;
    };
    expect((await fromEnv('abc')).problems).toEqual(['FLEETWISE_NOTICE_POLL_SECONDS: a number of seconds']);
    expect((await fromEnv('0.01')).problems).toEqual(['FLEETWISE_NOTICE_POLL_SECONDS: at least 0.05 s']);
    // The flag wins, and is the one named.
    const flagged = await runWorker(
      { ...withoutCredential, noticePollSeconds: '0' },
      { FLEETWISE_NOTICE_POLL_SECONDS: '5' },
    ).catch((e: unknown) => e);
    expect((flagged as ValidationError).problems).toEqual(['--notice-poll-seconds: at least 0.05 s']);
    // Empty, as a unit file's `Environment=FLEETWISE_NOTICE_POLL_SECONDS=` leaves it: the default; on to the credential.
    expect((await fromEnv('')).problems).toEqual([
      expect.stringMatching(/^no credential to register with: /),
    ]);
  });

  it('then the missing credential, once every flag is good', async () => {
    const error = await refusal(withoutCredential);
    expect(error.problems).toEqual([expect.stringMatching(/^no credential to register with: /)]);
  });
});
