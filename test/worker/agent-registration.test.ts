import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { WorkerProtocolError } from '../../src/controller/worker-identity/worker-protocol-error.js';
import type { WorkerRegistrar } from '../../src/controller/worker-identity/worker-registrar.js';
import { launchSecretFor } from '../../src/protocol/launch-secret.js';
import type {
  HeartbeatRequest,
  HeartbeatResponse,
  RegisterRequest,
  RegisterResponse,
} from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { WorkerAgent } from '../../src/worker/agent.js';
import { ControllerRequestError, type ControllerConnection } from '../../src/worker/controller-client.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { SavedCredential } from '../../src/worker/saved-credential.js';
import { recordLaunches, registrarOver, type RecordedLaunches } from '../helpers/recorded-launches.js';

/**
 * A registration whose answer is lost (the worker's request timed out, or the controller was killed between committing
 * it and answering) must not lock the worker out: the launch credential registers an instance once, so a worker that
 * never heard its token used to be refused for good and its instance replaced as silent. The worker proposes its
 * token and saves it before asking; the real registrar answers the same proposal again.
 */
const CLUSTER = 'agent-registration';
const KEY = 'cluster-key-for-agent-registration-0123';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-agent-registration-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let launches: RecordedLaunches;

beforeAll(async () => {
  launches = await recordLaunches(scratch, CLUSTER, 1);
});

/** The worker protocol without HTTP: the real registrar behind it, and an answer that can be lost after the commit. */
class RegistrarConnection implements ControllerConnection {
  loseNextAnswer = false;
  readonly requests: { credential: string; request: RegisterRequest }[] = [];

  constructor(private readonly registrar: WorkerRegistrar) {}

  async register(credential: string, request: RegisterRequest): Promise<RegisterResponse> {
    this.requests.push({ credential, request });
    let registration;
    try {
      registration = await this.registrar.register(credential, request);
    } catch (e) {
      if (e instanceof WorkerProtocolError) throw new ControllerRequestError(e.message, e.statusCode);
      throw e;
    }
    if (this.loseNextAnswer) {
      this.loseNextAnswer = false;
      throw new ControllerRequestError('The operation was aborted due to timeout', undefined);
    }
    return {
      instanceId: registration.instance.id,
      workerToken: registration.workerToken,
      heartbeatSeconds: 1,
      objectStore: join(scratch, 'store'),
    };
  }

  heartbeat(_request: HeartbeatRequest): Promise<HeartbeatResponse> {
    return Promise.resolve({ tasks: [] });
  }
}

describe('worker registration when the answer is lost', () => {
  it('the worker asks again with the token it proposed and is registered, in the same process and after a restart', async () => {
    const store = new MemoryStateStore({ storeId: 'agent-registration' });
    const { registrar, recordIds } = registrarOver(launches, store, CLUSTER, KEY);
    const record = { id: recordIds[0] as string };
    const cloudId = launches.cloudIds[0] as string;
    const launchToken = launches.tokens[0] as string;
    const connection = new RegistrarConnection(registrar);
    const workDir = join(scratch, 'worker');
    const agentOn = (): WorkerAgent =>
      new WorkerAgent({
        connection,
        credentials: {
          launch: launchSecretCredential(launchSecretFor(KEY, launchToken)),
          saved: new SavedCredential(workDir, cloudId),
        },
        executor: new ProcessExecutor({ stateDir: join(workDir, 'executor') }),
        openStore: (location) => new FsObjectStore(location),
        cloudInstanceId: cloudId,
        workDir,
      });

    // The controller commits the registration, the answer never arrives.
    const agent = agentOn();
    connection.loseNextAnswer = true;
    await expect(agent.register()).rejects.toThrow(/timeout/);
    const proposed = connection.requests[0]?.request.proposedToken;
    expect(proposed).toMatch(/^[A-Za-z0-9_-]{43,}$/);
    expect(store.instanceForWorkerToken(proposed as string)?.id).toBe(record.id);
    // The retry proposes the same token with the launch credential: answered, not refused as a second registration.
    await agent.register();
    expect(connection.requests[1]?.request).toMatchObject({
      identity: { kind: 'launch-secret' },
      proposedToken: proposed,
    });
    expect(agent.instanceId).toBe(record.id);
    expect(new SavedCredential(workDir, cloudId).load()).toBe(proposed);

    // A restarted worker whose first answer was lost too: its saved proposal re-registers it as its token.
    connection.requests.length = 0;
    const restarted = agentOn();
    await restarted.register();
    expect(connection.requests.map((r) => r.request.identity?.kind)).toEqual(['instance-token']);
    expect(restarted.instanceId).toBe(record.id);
    expect(
      store.listEvents({ instanceId: record.id }).filter((e) => e.kind === 'worker.registered'),
    ).toHaveLength(1);
  });
});
