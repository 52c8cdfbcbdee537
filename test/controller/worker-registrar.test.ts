import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { StateStore } from '../../src/controller/state-store.js';
import { WorkerProtocolError } from '../../src/controller/worker-identity/worker-protocol-error.js';
import type { WorkerRegistrar } from '../../src/controller/worker-identity/worker-registrar.js';
import { launchSecretFor } from '../../src/protocol/launch-secret.js';
import type { RegisterRequest, WorkerIdentity } from '../../src/protocol/worker-protocol.js';
import { recordLaunches, registrarOver, type RecordedLaunches } from '../helpers/recorded-launches.js';

/**
 * The registrar's rules in local mode (launch secrets), against the real local provider's instance records and a
 * memory store: a launch secret registers its own instance once; only the per-instance token it bought registers the
 * instance again; the cluster's key, another instance's secret or token, and a terminated instance are refused. A
 * property then throws random sequences of registrations at it: nothing ever registers an instance with a credential
 * that is not that instance's, and a launch credential succeeds at most once per instance.
 */
const CLUSTER = 'registrar';
const KEY = 'cluster-key-for-registrar-tests-0123';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-registrar-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let launches: RecordedLaunches;
let cloudIds: readonly string[] = [];
let tokens: readonly string[] = [];

beforeAll(async () => {
  launches = await recordLaunches(scratch, CLUSTER, 3);
  ({ cloudIds, tokens } = launches);
});

/** A fresh state that recorded the three launches (running). */
function rig(): { store: StateStore; registrar: WorkerRegistrar; recordIds: string[] } {
  const store = new MemoryStateStore({ storeId: 'registrar-test' });
  return { store, ...registrarOver(launches, store, CLUSTER, KEY) };
}

const request = (i: number, identity?: WorkerIdentity): RegisterRequest => ({
  instanceId: cloudIds[i] as string,
  executor: 'process',
  ...(identity === undefined ? {} : { identity }),
});
const secretOf = (i: number): string => launchSecretFor(KEY, tokens[i] as string);

async function statusOf(attempt: Promise<unknown>): Promise<number> {
  try {
    await attempt;
    return 200;
  } catch (e) {
    if (e instanceof WorkerProtocolError) return e.statusCode;
    throw e;
  }
}

describe('worker registrar (local launch secrets)', () => {
  it('a launch secret registers its instance once; then only the per-instance token does', async () => {
    const { store, registrar, recordIds } = rig();
    const first = await registrar.register(secretOf(0), request(0, { kind: 'launch-secret' }));
    expect(first).toMatchObject({ how: 'launch', instance: { id: recordIds[0] } });
    expect(store.instanceForWorkerToken(first.workerToken)?.id).toBe(recordIds[0]);
    // The same secret again (a copy of it, or a second worker): refused, and the first token stays the instance's.
    const second = registrar.register(secretOf(0), request(0, { kind: 'launch-secret' }));
    await expect(second).rejects.toMatchObject({
      statusCode: 409,
      message: /already has a registered worker/,
    });
    expect(store.instanceForWorkerToken(first.workerToken)?.id).toBe(recordIds[0]);
    // A restarted worker: its token registers it again and stays its token.
    const again = await registrar.register(first.workerToken, request(0, { kind: 'instance-token' }));
    expect(again).toMatchObject({ how: 're-registration', workerToken: first.workerToken });
    expect(store.listEvents({ instanceId: recordIds[0] }).map((e) => e.kind)).toEqual(
      expect.arrayContaining(['worker.registered', 'worker.reregistered']),
    );
  });

  it('a worker that proposed its token gets the same registration again when the answer was lost', async () => {
    const { store, registrar, recordIds } = rig();
    const proposal = 'p'.repeat(43);
    const launch = (i: number, proposedToken?: string): RegisterRequest => ({
      ...request(i, { kind: 'launch-secret' }),
      ...(proposedToken === undefined ? {} : { proposedToken }),
    });
    const first = await registrar.register(secretOf(0), launch(0, proposal));
    expect(first).toMatchObject({ how: 'launch', workerToken: proposal, instance: { id: recordIds[0] } });
    // The answer never reached the worker; it asks again with the same token: the same registration, recorded once.
    const again = await registrar.register(secretOf(0), launch(0, proposal));
    expect(again).toMatchObject({ how: 'launch', workerToken: proposal, instance: { id: recordIds[0] } });
    expect(store.instanceForWorkerToken(proposal)?.id).toBe(recordIds[0]);
    expect(
      store.listEvents({ instanceId: recordIds[0] }).filter((e) => e.kind === 'worker.registered'),
    ).toHaveLength(1);
    // Anyone else with the same launch secret (another token, or none) is still refused.
    for (const other of [launch(0, 'q'.repeat(43)), launch(0)])
      await expect(registrar.register(secretOf(0), other)).rejects.toMatchObject({ statusCode: 409 });
    // A token already taken by another instance cannot be proposed for a second one.
    await expect(registrar.register(secretOf(1), launch(1, proposal))).rejects.toMatchObject({
      statusCode: 409,
      message: /taken/,
    });
    expect(store.getInstance(recordIds[1] as string)?.workerTokenHash).toBeUndefined();
  });

  it('refuses the cluster key, other instances’ credentials, no identity, and a terminated instance', async () => {
    const { store, registrar, recordIds } = rig();
    const issued = await registrar.register(secretOf(1), request(1, { kind: 'launch-secret' }));
    const refusals: [string, Promise<unknown>, number][] = [
      ['no identity (the shared token, as before)', registrar.register(KEY, request(0)), 401],
      [
        'the cluster key as a launch secret',
        registrar.register(KEY, request(0, { kind: 'launch-secret' })),
        401,
      ],
      [
        "instance 1's secret for instance 0",
        registrar.register(secretOf(1), request(0, { kind: 'launch-secret' })),
        401,
      ],
      [
        "instance 1's token for instance 0",
        registrar.register(issued.workerToken, request(0, { kind: 'instance-token' })),
        403,
      ],
      [
        'an unknown token',
        registrar.register('no-such-token-0123456789', request(0, { kind: 'instance-token' })),
        401,
      ],
      [
        'an instance identity document in local mode',
        registrar.register(
          KEY,
          request(0, { kind: 'ec2-instance-identity', document: '{}', rsa2048: 'AAAAAAAAAAAAAAAAAAAA' }),
        ),
        401,
      ],
    ];
    for (const [what, attempt, status] of refusals) expect(await statusOf(attempt), what).toBe(status);
    store.setInstanceState(recordIds[2] as string, 'terminating', { reason: 'test' });
    expect(await statusOf(registrar.register(secretOf(2), request(2, { kind: 'launch-secret' })))).toBe(410);
    expect(store.getInstance(recordIds[0] as string)?.workerTokenHash).toBeUndefined();
  });

  it('property: a registration succeeds only with the claimed instance’s own credential, a launch at most once', async () => {
    const credential = fc.oneof(
      fc.record({ kind: fc.constant('launch-secret' as const), of: fc.nat(2) }),
      fc.record({ kind: fc.constant('issued-token' as const), of: fc.nat(2) }),
      fc.record({
        kind: fc.constant('cluster-key' as const),
        as: fc.constantFrom('launch-secret', 'instance-token'),
      }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ claim: fc.nat(2), credential }), { maxLength: 12 }),
        async (attempts) => {
          const { registrar, recordIds } = rig();
          const issued = new Map<number, string>();
          const launches = new Map<number, number>();
          for (const { claim, credential: c } of attempts) {
            let bearer: string;
            let identity: WorkerIdentity;
            let owner: number | undefined;
            if (c.kind === 'launch-secret') {
              [bearer, identity, owner] = [secretOf(c.of), { kind: 'launch-secret' }, c.of];
            } else if (c.kind === 'issued-token') {
              const token = issued.get(c.of);
              [bearer, identity, owner] = [
                token ?? 'never-issued-token-0123',
                { kind: 'instance-token' },
                token === undefined ? undefined : c.of,
              ];
            } else [bearer, identity, owner] = [KEY, { kind: c.as } as WorkerIdentity, undefined];
            try {
              const r = await registrar.register(bearer, request(claim, identity));
              expect(owner).toBe(claim);
              expect(r.instance.id).toBe(recordIds[claim]);
              if (r.how === 'launch') {
                launches.set(claim, (launches.get(claim) ?? 0) + 1);
                issued.set(claim, r.workerToken);
              } else expect(r.workerToken).toBe(issued.get(claim));
            } catch (e) {
              if (!(e instanceof WorkerProtocolError)) throw e;
            }
          }
          for (const count of launches.values()) expect(count).toBe(1);
        },
      ),
      { numRuns: 60, seed: 15 },
    );
  });
});
