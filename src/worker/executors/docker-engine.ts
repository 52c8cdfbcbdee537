import { createRequire } from 'node:module';
import type Docker from 'dockerode';

/** The Docker engine a worker (or the controller's startup check) talks to, and the bounds on its API calls. */

/**
 * dockerode, loaded on first use: with its gRPC and SSH dependencies it takes a fifth of a second to load, which
 * every worker and controller process using the process executor would otherwise pay at start.
 */
let dockerode: typeof Docker | undefined;
function dockerClass(): typeof Docker {
  dockerode ??= createRequire(import.meta.url)('dockerode') as typeof Docker;
  return dockerode;
}

/** A Docker client for DOCKER_HOST (unix:// or tcp://), or the default socket /var/run/docker.sock. */
export function dockerFromEnv(env: NodeJS.ProcessEnv = process.env): Docker {
  const Docker = dockerClass();
  const host = env.DOCKER_HOST;
  if (host === undefined || host === '') return new Docker({ socketPath: '/var/run/docker.sock' });
  if (host.startsWith('unix://')) return new Docker({ socketPath: host.slice('unix://'.length) });
  const url = /^(?:tcp|http):\/\/([^:/]+):(\d+)\/?$/.exec(host);
  if (url?.[1] === undefined || url[2] === undefined)
    throw new Error(`DOCKER_HOST=${host}: expected unix:///path/to/docker.sock or tcp://host:port`);
  return new Docker({ host: url[1], port: Number(url[2]), protocol: 'http' });
}

/** Where `dockerFromEnv` looks for the engine, for messages. */
export function dockerWhere(env: NodeJS.ProcessEnv = process.env): string {
  const host = env.DOCKER_HOST;
  return host === undefined || host === '' ? 'unix:///var/run/docker.sock' : host;
}

/**
 * Why no Docker engine answers a ping at DOCKER_HOST within `timeoutMs` (connection refused, no socket, a bad
 * DOCKER_HOST, the time ran out), or undefined when one does.
 */
export async function dockerUnreachable(
  env: NodeJS.ProcessEnv = process.env,
  timeoutMs = 5_000,
): Promise<string | undefined> {
  try {
    const docker = dockerFromEnv(env);
    // The typings omit ping's options; dockerode passes the signal on.
    const ping = docker.ping.bind(docker) as (opts: { abortSignal: AbortSignal }) => Promise<unknown>;
    await withinTimeout('a ping', timeoutMs, (abortSignal) => ping({ abortSignal }));
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/**
 * How long one Engine API call may take: a query (list, inspect, a log tail, a signal) and a change of a container
 * (create, start, remove, a kill's wait), which does real work on a loaded host. A hung engine fails the call, named,
 * instead of hanging the worker's heartbeat or the controller's round behind it. Pulls and builds are not bounded
 * here: they take as long as the image does.
 */
export const DOCKER_QUERY_TIMEOUT_MS = 15_000;
export const DOCKER_CHANGE_TIMEOUT_MS = 60_000;

/** The engine did not answer an API call in time. */
export class DockerTimeoutError extends Error {
  constructor(
    readonly call: string,
    readonly timeoutMs: number,
  ) {
    super(`the Docker engine did not answer ${call} within ${timeoutMs / 1000} s`);
    this.name = 'DockerTimeoutError';
  }
}

/**
 * `request` given a signal that aborts it after `timeoutMs`; rejects with DockerTimeoutError then, whether or not the
 * request heeds the signal.
 */
export async function withinTimeout<T>(
  call: string,
  timeoutMs: number,
  request: (abortSignal: AbortSignal) => Promise<T>,
): Promise<T> {
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const e = new DockerTimeoutError(call, timeoutMs);
      abort.abort(e);
      reject(e);
    }, timeoutMs);
  });
  try {
    return await Promise.race([request(abort.signal), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
