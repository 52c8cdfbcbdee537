/**
 * moto_server as a stand-in for EC2 and S3 (see /work/shared/research/local-aws-and-docker.md for what it does and does
 * not reproduce). One server per test file: started in beforeAll, wiped (and re-seeded, for deterministic ids) before
 * each test, stopped in afterAll. Without moto_server the suite fails (never skips).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, it } from 'vitest';
import type { AwsClientOptions, StaticCredentials } from '../../src/cloud/aws/client-config.js';

export const TEST_REGION = 'us-east-1';
export const TEST_CREDENTIALS: StaticCredentials = { accessKeyId: 'testing', secretAccessKey: 'testing' };

const STARTUP_TIMEOUT_MS = 20_000;

/** MOTO_SERVER_BIN, or moto_server on PATH. */
export function findMotoServer(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const explicit = env.MOTO_SERVER_BIN;
  if (explicit !== undefined && explicit !== '') return explicit;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, 'moto_server');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

export interface MotoServer {
  readonly endpoint: string;
  reset(): Promise<void>;
  stop(): Promise<void>;
}

export async function startMotoServer(
  binary: string,
  extraEnv: Readonly<Record<string, string>> = {},
): Promise<MotoServer> {
  // moto 5.2.1 turns instance-type validation on when this variable is set to anything, even "false"; without it,
  // RunInstances accepts p3.* types, which moto's DescribeInstanceTypes lacks. `extraEnv` is this server's alone:
  // set in process.env, it would reach every server started after it in this process (test files share one).
  const env = { ...process.env, ...extraEnv };
  delete env.MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION;
  const child: ChildProcess = spawn(binary, ['-H', '127.0.0.1', '-p', '0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  let output = '';
  const endpoint = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(new Error(`moto_server did not report its port within ${STARTUP_TIMEOUT_MS} ms:\n${output}`)),
      STARTUP_TIMEOUT_MS,
    );
    const onData = (data: Buffer): void => {
      output += data.toString();
      // Flask prints " * Running on http://127.0.0.1:NNNNN" once it is listening (on stderr).
      const match = /Running on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`moto_server exited with code ${String(code)} before listening:\n${output}`));
    });
  });
  // Keep draining its output so the pipe never fills and blocks the server.
  child.stdout?.resume();
  child.stderr?.resume();

  const reset = async (): Promise<void> => {
    const r = await fetch(`${endpoint}/moto-api/reset`, { method: 'POST' });
    if (!r.ok) throw new Error(`moto reset failed: HTTP ${r.status}`);
    // Deterministic resource ids after every reset.
    const s = await fetch(`${endpoint}/moto-api/seed?a=42`, { method: 'POST' });
    if (!s.ok) throw new Error(`moto seed failed: HTTP ${s.status}`);
  };

  // Wait until it answers HTTP (it prints the line as it starts listening).
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    try {
      await reset();
      break;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const stop = async (): Promise<void> => {
    process.removeListener('exit', killOnExit);
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
  };
  return { endpoint, reset, stop };
}

/** What a test gets: the endpoint and ready-made client options (static dummy credentials, no SDK retries). */
export interface MotoContext {
  readonly endpoint: string;
  readonly clientOptions: AwsClientOptions;
  /** Environment for a subprocess (the CLI) that should talk to this moto. */
  readonly childEnv: NodeJS.ProcessEnv;
}

/**
 * `describe` with a moto server around it. Inside `body`, read `moto.endpoint` etc. only from hooks and tests (the
 * server starts in beforeAll).
 */
export interface DescribeWithMotoOptions {
  /**
   * Wipe moto's state before each test (the default). Suites whose tests keep apart by themselves (e.g. one cluster
   * name per test) can share state and the setup made in beforeAll, which saves moto's slow per-call latency.
   */
  readonly resetBeforeEach?: boolean;
}

export function describeWithMoto(
  name: string,
  body: (moto: MotoContext) => void,
  options: DescribeWithMotoOptions = {},
): void {
  const binary = findMotoServer();
  if (binary === undefined) {
    const message =
      `moto_server not found on PATH (set MOTO_SERVER_BIN, or install it: pip install 'moto[server]'); ` +
      `the AWS tests of "${name}" need it`;
    // A test that cannot find its dependency fails, never skips (`npm test` tries to install it first).
    describe(name, () => {
      it('requires moto_server', () => {
        throw new Error(message);
      });
    });
    return;
  }
  describe(name, () => {
    let server: MotoServer | undefined;
    const current = (): MotoServer => {
      if (server === undefined) throw new Error('moto_server is not running (used outside a hook or test?)');
      return server;
    };
    beforeAll(async () => {
      server = await startMotoServer(binary);
    });
    afterAll(async () => {
      await server?.stop();
    });
    if (options.resetBeforeEach !== false)
      beforeEach(async () => {
        await current().reset();
      });
    body({
      get endpoint() {
        return current().endpoint;
      },
      get clientOptions() {
        return {
          endpoint: current().endpoint,
          region: TEST_REGION,
          credentials: TEST_CREDENTIALS,
          maxAttempts: 1,
        };
      },
      get childEnv() {
        return {
          ...process.env,
          AWS_ENDPOINT_URL: current().endpoint,
          AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
          AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
          AWS_REGION: TEST_REGION,
          AWS_MAX_ATTEMPTS: '1',
          AWS_EC2_METADATA_DISABLED: 'true',
        };
      },
    });
  });
}

/** `fleetwise controller` arguments for EC2 on moto: its AMI, cluster, state and objects, one-second rounds and passes. */
export function awsControllerArgs(ami: string, cluster: string, stateDir: string, objects: string): string[] {
  return [
    'controller',
    '--provider',
    'aws',
    '--cluster',
    cluster,
    '--state-dir',
    stateDir,
    '--round-seconds',
    '1',
    '--poll-seconds',
    '1',
    '--ami',
    ami,
    '--object-store',
    objects,
  ];
}
