import { join } from 'node:path';
import type { Command } from 'commander';
import { ValidationError } from '../core/validation.js';
import {
  ADMIN_TOKEN_FILE,
  API_URL_FILE,
  findLocalController,
  LOCAL_DEFAULT_LISTEN,
  LOCAL_STATE_DIR,
} from './local-state.js';

/** Which controller a command talks to and with which token: flags, then the environment, then the local state. */

export const SERVER_ENV = 'FLEETWISE_SERVER';
export const TOKEN_ENV = 'FLEETWISE_TOKEN';

export interface ConnectionOptions {
  readonly server?: string | undefined;
  readonly token?: string | undefined;
  /**
   * The command's --json: a local state passed over is not told on stderr, which holds only the error (one JSON
   * object); an error for want of an address or a token names it.
   */
  readonly json?: boolean | undefined;
}

/** `--server` and `--token` on a command (falling back to FLEETWISE_SERVER and FLEETWISE_TOKEN). */
export function addConnectionOptions(command: Command): Command {
  return command
    .option(
      '--server <url>',
      `controller API address, e.g. http://${LOCAL_DEFAULT_LISTEN} (default: $${SERVER_ENV}, else the local controller's ${LOCAL_STATE_DIR}/${API_URL_FILE})`,
    )
    .option(
      '--token <token>',
      `API token of your team, or the admin token (default: $${TOKEN_ENV}, else the local controller's admin token); ` +
        `sent only to a server given by --server or $${SERVER_ENV}`,
    );
}

/**
 * `10.0.0.5:7070` → `http://10.0.0.5:7070`; a trailing slash is dropped. `source` is what named the address, for
 * its problems.
 */
export function normalizeServer(server: string, source = '--server'): string {
  const trimmed = server.trim().replace(/\/+$/, '');
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed) ? trimmed : `http://${trimmed}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new ValidationError(source, [
      `${JSON.stringify(withoutCredentials(server))}: expected a URL like http://${LOCAL_DEFAULT_LISTEN}`,
    ]);
  }
  // fetch refuses such an address, quoting it, and every message naming the address would print the password; the
  // controller takes a token, not a user and password.
  if (url.username !== '' || url.password !== '')
    throw new ValidationError(source, [
      `the address holds a user name or password, which the controller does not take: give the address alone ` +
        `(e.g. http://${LOCAL_DEFAULT_LISTEN}) and the API token with --token or ${TOKEN_ENV}`,
    ]);
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ValidationError(source, [`${JSON.stringify(server)}: only http:// and https:// are supported`]);
  return withScheme;
}

/**
 * An address as an error may echo it: everything before its last `@` is masked with the scheme kept, as a password
 * there may hold any character (an address that does not parse has no parts to go by).
 */
function withoutCredentials(server: string): string {
  const at = server.lastIndexOf('@');
  if (at === -1) return server;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(server)?.[0] ?? '';
  return `${scheme}***${server.slice(at)}`;
}

/** A controller to talk to, the token for it, and where they were found (for hints when the controller refuses). */
export interface ResolvedConnection {
  readonly server: string;
  readonly token: string;
  /** Where the address came from when it was not given, for the hint when the controller does not answer. */
  readonly origin?: string;
  /** The local state's admin-token file the token was read from, for the hint when the controller refuses it. */
  readonly tokenFile?: string;
}

/**
 * From command options, then the environment, then the local controller's state directory (`.fleetwise/` here or
 * in a parent directory: the quick start needs no exported variable). A token goes only to a server named the same
 * way: one given by flag or environment is never sent to the address a found `api-url` names (a cloned repository
 * or another user's `/tmp/.fleetwise` could name any), and the local admin token only to the local controller's
 * address. Throws saying what is missing.
 */
export function resolveConnection(
  options: ConnectionOptions,
  env: NodeJS.ProcessEnv = process.env,
  cwd: string = process.cwd(),
): ResolvedConnection {
  const given = (value: string | undefined): string | undefined =>
    value === undefined || value.trim() === '' ? undefined : value.trim();
  const server = given(options.server) ?? given(env[SERVER_ENV]);
  const token = given(options.token) ?? given(env[TOKEN_ENV]);
  const tokenSource = given(options.token) === undefined ? TOKEN_ENV : '--token';
  // Checked before anything quotes the address.
  if (server !== undefined)
    normalizeServer(server, given(options.server) === undefined ? SERVER_ENV : '--server');
  if (token !== undefined) requireSendableToken(token, tokenSource);
  if (server !== undefined && token !== undefined) return { server, token };
  if (token !== undefined)
    throw new ValidationError(tokenSource, [
      `a token is given but no controller address: pass --server URL or set ${SERVER_ENV} ` +
        `(a token given so is sent only to a server given so, never to a local controller found in ` +
        `${LOCAL_STATE_DIR}/; to use that controller with its admin token, give no token)`,
    ]);
  const ignored: string[] = [];
  const local = findLocalController(cwd, options.json === true ? () => undefined : undefined, ignored);
  const passedOver =
    'the local controller state found was not used, as another user could have written it: ' +
    ignored.join('; ');
  const localToken = (token: string, stateDir: string): string => {
    requireSendableToken(token, join(stateDir, ADMIN_TOKEN_FILE));
    return token;
  };
  if (server !== undefined) {
    if (local?.token !== undefined && sameAddress(server, local.server))
      return {
        server,
        token: localToken(local.token, local.stateDir),
        tokenFile: join(local.stateDir, ADMIN_TOKEN_FILE),
      };
    throw new Error(
      `no API token: pass --token TOKEN or set ${TOKEN_ENV}` +
        (local === undefined ? '' : ` (${local.stateDir} has no admin token for ${server})`) +
        (ignored.length === 0 ? '' : `; ${passedOver}`),
    );
  }
  if (local === undefined)
    throw new Error(
      `no controller address: pass --server URL or set ${SERVER_ENV} (e.g. http://${LOCAL_DEFAULT_LISTEN}); ` +
        (ignored.length === 0
          ? `no local controller state (${LOCAL_STATE_DIR}/) here or in a parent directory`
          : `${passedOver}; make it yours and writable by you alone (chmod 700) or pass --server`),
    );
  if (local.token === undefined)
    throw new Error(
      `no API token: ${local.stateDir} has no admin token for ${local.server}; pass --server URL and --token ` +
        `TOKEN, or set ${SERVER_ENV} and ${TOKEN_ENV}`,
    );
  return {
    server: local.server,
    token: localToken(local.token, local.stateDir),
    origin: `the local controller of ${local.stateDir}`,
    tokenFile: join(local.stateDir, ADMIN_TOKEN_FILE),
  };
}

/**
 * Refuse a token no Authorization header can carry, or the controller take (whitespace, a line break, a control
 * character, one beyond Latin-1: a pasting mistake), naming where it came from and never the token itself; sent, it
 * would fail as a connection error that quotes the header.
 */
const UNSENDABLE_IN_TOKEN = /[\s\u0000-\u001f\u007f-\u009f]|[^\u0000-\u00ff]/;

function requireSendableToken(token: string, source: string): void {
  if (UNSENDABLE_IN_TOKEN.test(token))
    throw new ValidationError(source, [
      'the token holds whitespace, a line break or another character a token cannot have: give the token alone, on one line',
    ]);
}

function sameAddress(a: string, b: string): boolean {
  try {
    return new URL(normalizeServer(a)).origin === new URL(normalizeServer(b)).origin;
  } catch {
    return false;
  }
}
