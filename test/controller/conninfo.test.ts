import { expect, it } from 'vitest';
import {
  boundedConninfo,
  DEFAULT_CONNECTION_BOUNDS,
  TOOL_CONNECTION_BOUNDS,
} from '../../src/controller/state/postgres/conninfo.js';

/** The server settings a conninfo URL sends in `options`. */
const optionsOf = (conninfo: string): string => new URL(conninfo).searchParams.get('options') ?? '';

it('keeps a server setting the URL names, matching whole setting names only', () => {
  // `lock_timeout` is inside `deadlock_timeout`: the URL's deadlock setting must not stand for the lock bound.
  expect(optionsOf(boundedConninfo('postgres://db/fleet?options=-c%20deadlock_timeout%3D2s'))).toBe(
    '-c deadlock_timeout=2s -c statement_timeout=4000 -c lock_timeout=2000 -c idle_in_transaction_session_timeout=2500',
  );
  // Every form PostgreSQL reads: `-c name=value`, `-cname=value`, `--name=value` (a dash standing for an underscore).
  expect(
    optionsOf(
      boundedConninfo(
        'postgres://db/fleet?options=' +
          encodeURIComponent(
            '-cstatement_timeout=0 --lock-timeout=5s -c Idle_In_Transaction_Session_Timeout=1',
          ),
      ),
    ),
  ).toBe('-cstatement_timeout=0 --lock-timeout=5s -c Idle_In_Transaction_Session_Timeout=1');
  // A setting whose value mentions another's name does not set that one.
  expect(
    optionsOf(boundedConninfo('postgres://db/fleet?options=-c%20application_name%3Dlock_timeout')),
  ).toContain('-c lock_timeout=2000');
});

it('gives a tool holding no lease no idle-in-transaction limit, yet bounded connects and TCP waits', () => {
  const url = new URL(boundedConninfo('postgres://db/fleet', TOOL_CONNECTION_BOUNDS));
  expect(url.searchParams.get('options')).toContain('-c idle_in_transaction_session_timeout=0');
  expect(TOOL_CONNECTION_BOUNDS.statementTimeoutMs).toBeGreaterThan(
    DEFAULT_CONNECTION_BOUNDS.statementTimeoutMs,
  );
  expect(Number(url.searchParams.get('connect_timeout'))).toBeGreaterThan(0);
  expect(Number(url.searchParams.get('tcp_user_timeout'))).toBeGreaterThan(0);
  expect(url.searchParams.get('keepalives')).toBe('1');
});
