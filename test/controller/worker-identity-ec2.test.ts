import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { ManualClock } from '../../src/controller/clock.js';
import {
  parseCertificates,
  Ec2IdentityVerifier,
} from '../../src/controller/worker-identity/ec2-identity-document.js';
import { WorkerRegistrar } from '../../src/controller/worker-identity/worker-registrar.js';
import { WorkerTaskControl } from '../../src/controller/worker-task-control.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { WorkerAgent } from '../../src/worker/agent.js';
import { ControllerClient, ControllerRequestError } from '../../src/worker/controller-client.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { ec2IdentityCredential, type LaunchCredentialSource } from '../../src/worker/launch-credential.js';
import { SavedCredential } from '../../src/worker/saved-credential.js';
import { startFakeImds, type FakeImds } from '../helpers/fake-imds.js';
import { identityDocument, makeIdentitySigner, type IdentitySigner } from '../helpers/identity-signer.js';
import { describeWithMoto } from '../helpers/moto.js';
import { FakeControllerService } from './api-fake-service.js';

/**
 * Worker identity on EC2: a worker registers with the instance identity document and RSA-2048 signature it reads from
 * the metadata service (IMDSv2, here a fake over HTTP), which the controller verifies against the configured
 * certificate (a test key made with openssl stands in for AWS's) and checks against EC2's description of the
 * instance (moto) and its own launch record. Everything else is refused: a forged signature, a document of another
 * instance, region, account or image, an instance of another cluster, the shared token alone, and a second
 * registration of an instance that has its worker; a restarted worker gets its instance back with its saved token.
 */

const CLUSTER = 'identity';
const CLUSTER_KEY = 'cluster-worker-key-0123456789abcdef';
const AMI = 'ami-12c6146b';
const TYPE = 'c7i.large';
const ZONE = 'us-east-1a';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-identity-ec2-'));

interface Launched {
  readonly cloudId: string;
  readonly launchToken: string;
}

describeWithMoto(
  'worker identity on EC2 (moto, a fake metadata service, openssl-signed documents)',
  (moto) => {
    let signer: IdentitySigner;
    let forger: IdentitySigner;
    let imds: FakeImds;
    let provider: Ec2Provider;
    /** Two instances of the cluster, one of another cluster, one of the cluster the state never recorded. */
    let a: Launched;
    let b: Launched;
    let foreign: Launched;
    let unrecorded: Launched;

    async function launch(cluster: string, token: string): Promise<Launched> {
      const result = await provider.launch({
        typeName: TYPE,
        idempotencyToken: token,
        clusterName: cluster,
        planId: 'round-1',
        instanceKey: token,
        availabilityZones: [ZONE],
      });
      return { cloudId: result.instanceIds[0] as string, launchToken: token };
    }

    beforeAll(async () => {
      signer = makeIdentitySigner();
      forger = makeIdentitySigner(); // same issuer and serial, another key
      imds = await startFakeImds();
      provider = new Ec2Provider(
        { region: 'us-east-1', amiId: AMI, placements: [{ availabilityZone: ZONE }] },
        { api: ec2ApiFromClient(createEc2Client(moto.clientOptions)), sleep: async () => {} },
      );
      a = await launch(CLUSTER, 'token-a');
      b = await launch(CLUSTER, 'token-b');
      foreign = await launch('another-cluster', 'token-f');
      unrecorded = await launch(CLUSTER, 'token-u');
    });
    afterAll(async () => {
      signer.dispose();
      forger.dispose();
      await imds.close();
      rmSync(scratch, { recursive: true, force: true });
    });

    /** A controller's worker endpoint on a fresh state that recorded the launches of `a` and `b`. */
    async function controllerRig(): Promise<{
      service: FakeControllerService;
      server: ApiServer;
      recordOf: (l: Launched) => string;
    }> {
      const service = new FakeControllerService();
      const store = service.store;
      const ids = new Map<string, string>();
      for (const l of [a, b]) {
        const inst = store.createInstance({ typeName: TYPE, launchToken: l.launchToken });
        store.setInstanceState(inst.id, 'launching', { cloudId: l.cloudId, availabilityZone: ZONE });
        store.setInstanceState(inst.id, 'running');
        ids.set(l.cloudId, inst.id);
      }
      const registrar = new WorkerRegistrar({
        store,
        clusterName: CLUSTER,
        clusterKey: CLUSTER_KEY,
        describeInstance: (cloudId) => provider.describeInstance(CLUSTER, cloudId),
        launchCredential: {
          kind: 'ec2-instance-identity',
          verifier: new Ec2IdentityVerifier(
            parseCertificates(signer.certificatePem, 'test'),
            'the test certificate',
          ),
          region: 'us-east-1',
        },
      });
      const workers = new WorkerTaskControl({
        store,
        catalog: service.catalog,
        clock: new ManualClock(),
        registrar,
        objectStoreLocation: join(scratch, 'objects'),
        heartbeatSeconds: 1,
        heartbeatTimeoutSeconds: 60,
      });
      const server = await startApiServer(service, {
        listen: '127.0.0.1:0',
        adminToken: 'admin-0123456789abcdef',
        workers,
      });
      return { service, server, recordOf: (l) => ids.get(l.cloudId) as string };
    }

    function documentOf(l: Launched, changes: Partial<Parameters<typeof identityDocument>[0]> = {}): string {
      return identityDocument({
        instanceId: l.cloudId,
        imageId: AMI,
        instanceType: TYPE,
        availabilityZone: ZONE,
        ...changes,
      });
    }

    function agentOn(
      workDir: string,
      url: string,
      claims: Launched,
      launch?: LaunchCredentialSource,
    ): WorkerAgent {
      return new WorkerAgent({
        connection: new ControllerClient(url),
        credentials: { launch, saved: new SavedCredential(workDir, claims.cloudId) },
        executor: new ProcessExecutor({ stateDir: join(workDir, 'executor') }),
        openStore: (location) => new FsObjectStore(location),
        cloudInstanceId: claims.cloudId,
        workDir,
      });
    }

    async function register(
      url: string,
      bearer: string,
      body: Record<string, unknown>,
    ): Promise<{ status: number; text: string }> {
      const response = await fetch(`${url}/v1/workers/register`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
        body: JSON.stringify({ executor: 'docker', ...body }),
      });
      return { status: response.status, text: await response.text() };
    }

    it('registers the worker of a launched instance once; a restarted worker gets it back with its saved token', async () => {
      const { service, server, recordOf } = await controllerRig();
      try {
        const document = documentOf(a);
        imds.serve({ document, rsa2048: signer.sign(document) });
        const fromImds = ec2IdentityCredential({ clusterToken: CLUSTER_KEY, imdsUrl: imds.url });
        const first = agentOn(join(scratch, 'first'), server.url, a, fromImds);
        const before = imds.requests.length;
        await first.register();
        // IMDSv2: a session token first, then the document and its signature with it.
        expect(imds.requests.slice(before)).toEqual([
          'PUT /latest/api/token',
          'GET /latest/dynamic/instance-identity/document',
          'GET /latest/dynamic/instance-identity/rsa2048',
        ]);
        expect(first.instanceId).toBe(recordOf(a));
        expect(service.store.getInstance(recordOf(a))?.workerTokenHash).toBeDefined();
        await first.tick();

        // The same document from anywhere else (a second worker, a copy) is refused: the instance has its worker.
        const second = agentOn(join(scratch, 'second'), server.url, a, fromImds);
        const refused = await second.register().catch((e: unknown) => e);
        expect(refused).toBeInstanceOf(ControllerRequestError);
        expect((refused as ControllerRequestError).statusCode).toBe(409);
        expect((refused as Error).message).toMatch(/already has a registered worker/);

        // The first worker restarts: no launch credential needed, its saved per-instance token registers it again.
        const restarted = agentOn(join(scratch, 'first'), server.url, a);
        await restarted.register();
        expect(restarted.instanceId).toBe(recordOf(a));
        await restarted.tick();
        const kinds = service.store.listEvents({ instanceId: recordOf(a) }).map((e) => e.kind);
        expect(kinds.filter((k) => k === 'worker.registered')).toHaveLength(1);
        expect(kinds).toContain('worker.reregistered');
        await restarted.run(AbortSignal.abort());
        await first.run(AbortSignal.abort());
      } finally {
        await server.close();
      }
    });

    it('refuses forged, tampered, misdirected and foreign documents, and the shared token alone', async () => {
      const { service, server, recordOf } = await controllerRig();
      try {
        const valid = documentOf(b);
        const cases: {
          what: string;
          bearer?: string;
          body: Record<string, unknown>;
          status: number;
          says: RegExp;
        }[] = [
          {
            what: 'the shared token alone (the takeover)',
            body: { instanceId: b.cloudId },
            status: 401,
            says: /alone no longer registers/,
          },
          {
            what: 'a signature by another key with the same issuer and serial',
            body: {
              instanceId: b.cloudId,
              identity: { kind: 'ec2-instance-identity', document: valid, rsa2048: forger.sign(valid) },
            },
            status: 401,
            says: /does not verify/,
          },
          {
            what: 'a document edited after signing',
            body: {
              instanceId: b.cloudId,
              identity: {
                kind: 'ec2-instance-identity',
                document: valid.replace(TYPE, 'p3.2xlarge'),
                rsa2048: signer.sign(valid),
              },
            },
            status: 401,
            says: /not the one the signature covers/,
          },
          {
            what: "instance a's document replayed for instance b",
            body: {
              instanceId: b.cloudId,
              identity: {
                kind: 'ec2-instance-identity',
                document: documentOf(a),
                rsa2048: signer.sign(documentOf(a)),
              },
            },
            status: 403,
            says: new RegExp(`signed for instance ${a.cloudId}, not ${b.cloudId}`),
          },
          ...(
            [
              ['region', { region: 'eu-west-1' }, /region eu-west-1, not us-east-1/],
              ['account', { accountId: '999999999999' }, /account 999999999999, not 123456789012/],
              ['image', { imageId: 'ami-00000000' }, /image ami-00000000/],
              ['type', { instanceType: 'r7i.large' }, /type r7i\.large, not c7i\.large/],
            ] as const
          ).map(([what, change, says]) => {
            const document = documentOf(b, change);
            return {
              what: `a document of another ${what}`,
              body: {
                instanceId: b.cloudId,
                identity: { kind: 'ec2-instance-identity', document, rsa2048: signer.sign(document) },
              },
              status: 403,
              says,
            };
          }),
          {
            what: 'an instance of another cluster',
            body: {
              instanceId: foreign.cloudId,
              identity: {
                kind: 'ec2-instance-identity',
                document: documentOf(foreign),
                rsa2048: signer.sign(documentOf(foreign)),
              },
            },
            status: 403,
            says: /tagged fleetwise:cluster=identity/,
          },
          {
            what: 'an instance the state did not record',
            body: {
              instanceId: unrecorded.cloudId,
              identity: {
                kind: 'ec2-instance-identity',
                document: documentOf(unrecorded),
                rsa2048: signer.sign(documentOf(unrecorded)),
              },
            },
            status: 409,
            says: /not in the controller's state/,
          },
          {
            what: 'a valid document with a wrong worker token',
            bearer: 'not-the-cluster-key-0123456789',
            body: {
              instanceId: b.cloudId,
              identity: { kind: 'ec2-instance-identity', document: valid, rsa2048: signer.sign(valid) },
            },
            status: 401,
            says: /invalid worker token/,
          },
          {
            what: 'a local launch secret on EC2',
            body: { instanceId: b.cloudId, identity: { kind: 'launch-secret' } },
            status: 401,
            says: /not a launch secret/,
          },
        ];
        for (const c of cases) {
          const answer = await register(server.url, c.bearer ?? CLUSTER_KEY, c.body);
          expect(answer.status, `${c.what}: ${answer.text}`).toBe(c.status);
          expect(answer.text, c.what).toMatch(c.says);
          expect(answer.text, c.what).not.toContain('workerToken');
        }
        // None of it registered b: its own signed document still does, once.
        expect(service.store.getInstance(recordOf(b))?.workerTokenHash).toBeUndefined();
        const own = await register(server.url, CLUSTER_KEY, {
          instanceId: b.cloudId,
          identity: { kind: 'ec2-instance-identity', document: valid, rsa2048: signer.sign(valid) },
        });
        expect(own.status, own.text).toBe(200);
        expect(JSON.parse(own.text)).toMatchObject({ instanceId: recordOf(b) });
        const again = await register(server.url, CLUSTER_KEY, {
          instanceId: b.cloudId,
          identity: { kind: 'ec2-instance-identity', document: valid, rsa2048: signer.sign(valid) },
        });
        expect(again.status, again.text).toBe(409);
      } finally {
        await server.close();
      }
    });
  },
  { resetBeforeEach: false },
);
