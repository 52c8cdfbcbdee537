import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { ValidationError } from '../../src/core/validation.js';
import { loadControllerConfig } from '../../src/controller/config-loading.js';

/** The controller configuration's state location and lease timings: defaults, and refusals naming the field. */

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-ha-config-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function problemsOf(fn: () => unknown): readonly string[] {
  try {
    fn();
  } catch (e) {
    if (e instanceof ValidationError) return e.problems;
    throw e;
  }
  throw new Error('expected a ValidationError');
}

const base = { provider: 'local', region: 'us-east-1', stateDir: join(scratch, 'state') } as const;

it('keeps the state in the state directory unless given a PostgreSQL URL, with client-go lease timings', () => {
  const sqlite = loadControllerConfig({ flags: base });
  expect(sqlite.state).toBeUndefined();
  expect(sqlite.lease).toEqual({ durationSeconds: 15, renewDeadlineSeconds: 10, retrySeconds: 2 });
  const shared = loadControllerConfig({ flags: { ...base, state: 'postgresql://fleetwise@db:5432/fleet' } });
  expect(shared.state).toBe('postgresql://fleetwise@db:5432/fleet');
});

it('refuses a state that is not a PostgreSQL URL, naming the flag', () => {
  expect(problemsOf(() => loadControllerConfig({ flags: { ...base, state: 'mysql://db/fleet' } }))).toEqual([
    '--state: a postgres://user@host:port/database URL (left out: SQLite in the state directory)',
  ]);
});

it('refuses lease timings under which a holder could act after its lease passed on, naming the line', () => {
  const config = join(scratch, 'ha.yaml');
  writeFileSync(
    config,
    ['state: postgres://db/fleet', 'lease:', '  durationSeconds: 5', '  renewDeadlineSeconds: 6', ''].join(
      '\n',
    ),
  );
  expect(problemsOf(() => loadControllerConfig({ flags: { ...base, config } }))).toEqual([
    'lease.renewDeadlineSeconds (line 4): must be less than durationSeconds (5): the holder stops before its lease can pass to another',
  ]);
  writeFileSync(
    config,
    ['lease: { durationSeconds: 5, renewDeadlineSeconds: 4, retrySeconds: 4 }', ''].join('\n'),
  );
  expect(problemsOf(() => loadControllerConfig({ flags: { ...base, config } }))).toEqual([
    'lease.retrySeconds (line 1): must be less than renewDeadlineSeconds (4): a renewal needs more than one try before the deadline',
  ]);
});

it('refuses lease timings that leave a database statement, or a paused transaction, too little room', () => {
  const config = join(scratch, 'room.yaml');
  writeFileSync(config, 'lease: { durationSeconds: 10.5, renewDeadlineSeconds: 10, retrySeconds: 9.5 }\n');
  expect(problemsOf(() => loadControllerConfig({ flags: { ...base, config } }))).toEqual([
    'lease.renewDeadlineSeconds (line 1): must be at least 1 s less than durationSeconds (10.5): a transaction left open by a paused holder is ended within half that margin',
    'lease.retrySeconds (line 1): must be at least 1 s less than renewDeadlineSeconds (10): each database statement may take half the difference, and blocks the renewal meanwhile',
  ]);
});

it('takes an http(s) URL to advertise with the lease, and refuses anything else naming the flag', () => {
  const config = loadControllerConfig({ flags: { ...base, advertiseUrl: 'http://box-a.internal:7070' } });
  expect(config.advertiseUrl).toBe('http://box-a.internal:7070');
  expect(problemsOf(() => loadControllerConfig({ flags: { ...base, advertiseUrl: 'box-a:7070' } }))).toEqual([
    '--advertise-url: an http:// or https:// URL where clients reach this controller, e.g. http://box-a:7070',
  ]);
});

it('refuses lease timings over a day, naming each field and the maximum, before PostgreSQL would refuse the timeouts', () => {
  const config = join(scratch, 'huge.yaml');
  writeFileSync(
    config,
    'lease: { durationSeconds: 5000000, renewDeadlineSeconds: 100000, retrySeconds: 90000 }\n',
  );
  const limit =
    'must be at most 86400 (a day): the database timeouts and timers derived from it take at most 2^31 − 1 ms';
  expect(problemsOf(() => loadControllerConfig({ flags: { ...base, config } }))).toEqual([
    `lease.durationSeconds (line 1): ${limit}`,
    `lease.renewDeadlineSeconds (line 1): ${limit}`,
    `lease.retrySeconds (line 1): ${limit}`,
  ]);
  // One over the fencing margin alone, as the reported idle_in_transaction_session_timeout of 2499995000 ms was.
  writeFileSync(config, 'lease: { durationSeconds: 5000000, renewDeadlineSeconds: 10, retrySeconds: 2 }\n');
  expect(problemsOf(() => loadControllerConfig({ flags: { ...base, config } }))).toEqual([
    `lease.durationSeconds (line 1): ${limit}`,
  ]);
  writeFileSync(config, 'lease: { durationSeconds: 86400, renewDeadlineSeconds: 86399, retrySeconds: 1 }\n');
  expect(loadControllerConfig({ flags: { ...base, config } }).lease).toEqual({
    durationSeconds: 86400,
    renewDeadlineSeconds: 86399,
    retrySeconds: 1,
  });
});
