import { TAG_CLUSTER, TAG_LAUNCH_TOKEN, type CloudInstance } from '../../cloud/provider.js';
import { launchSecretFor, newWorkerToken } from '../../protocol/launch-secret.js';
import type { RegisterRequest, WorkerIdentity } from '../../protocol/worker-protocol.js';
import { tokensEqual } from '../api/auth.js';
import { adoptedLaunchToken } from '../reconcile/cloud-sync.js';
import type { InstanceRecord, StateStore } from '../state-store.js';
import {
  IdentityDocumentError,
  type Ec2IdentityDocument,
  type Ec2IdentityVerifier,
} from './ec2-identity-document.js';
import { WorkerProtocolError } from './worker-protocol-error.js';

/**
 * Who may register as which instance (ARCHITECTURE.md "Worker identity"). A worker's identity is bound to its
 * instance's launch, as SPIRE's node attestors and Vault's AWS auth method bind theirs:
 *
 * - The first registration of an instance presents a launch credential: on EC2 the instance identity document, signed
 *   by AWS (verified against AWS's certificate for the region, then checked against EC2's description of the
 *   instance and the controller's launch record: the instance id, region, account, image and type); locally the
 *   one-time secret derived for that launch (protocol/launch-secret.ts). The instance must be one this controller
 *   launched (or adopted), not terminating, and without a registered worker.
 * - It answers a random per-instance token, stored hashed. From then on a launch credential no longer registers the
 *   instance (trust on first use, as SPIRE's aws_iid): a second worker presenting the same document or secret, or
 *   anyone who copied them, is refused with 409. A restarted worker re-registers with the per-instance token it saved,
 *   and keeps it (Vault's client nonce plays this part for re-authentication).
 * - The cluster's shared worker token proves nothing about which instance a worker runs on, so alone it registers
 *   nothing.
 *
 * A worker that loses its saved token cannot register its instance again; it stops heartbeating, and the instance is
 * replaced after the heartbeat timeout like any silent worker. That is the price of refusing every copy.
 */

export type LaunchCredentialCheck =
  | { readonly kind: 'launch-secret' }
  | {
      readonly kind: 'ec2-instance-identity';
      readonly verifier: Ec2IdentityVerifier;
      /** The controller's region: documents from elsewhere are refused. */
      readonly region: string;
    };

export interface WorkerRegistrarOptions {
  readonly store: StateStore;
  readonly clusterName: string;
  /**
   * The cluster's worker key (the state directory's `worker-token`): the bearer EC2 workers present with their
   * document (their user data has it), and the key local launch secrets derive from.
   */
  readonly clusterKey: string;
  /** The provider's own record of an instance of the cluster (EC2's description, the local instance file). */
  readonly describeInstance: (cloudId: string) => Promise<CloudInstance | undefined>;
  /** The launch credential this cluster's workers present. */
  readonly launchCredential: LaunchCredentialCheck;
}

export interface Registration {
  readonly instance: InstanceRecord;
  /** The per-instance token the worker heartbeats with (new for a launch, the presented one for a re-registration). */
  readonly workerToken: string;
  readonly how: 'launch' | 're-registration';
}

const LIVE_CLOUD_STATES: ReadonlySet<string> = new Set(['pending', 'running']);

export class WorkerRegistrar {
  constructor(private readonly options: WorkerRegistrarOptions) {}

  /** Authenticate a registration and issue (or confirm) the instance's token; a WorkerProtocolError when refused. */
  async register(credential: string, request: RegisterRequest): Promise<Registration> {
    const identity = request.identity;
    if (identity === undefined)
      throw new WorkerProtocolError(
        401,
        "the cluster's worker token alone no longer registers a worker: a worker proves which instance it runs on " +
          `(identity.kind ${this.options.launchCredential.kind} on this cluster, or instance-token with the ` +
          'per-instance token of an earlier registration); upgrade the worker',
      );
    switch (identity.kind) {
      case 'instance-token':
        return this.reregister(credential, request);
      case 'launch-secret':
        return this.registerWithLaunchSecret(credential, request);
      case 'ec2-instance-identity':
        return this.registerWithIdentityDocument(credential, request, identity);
    }
  }

  /** A restarted worker: its saved per-instance token names its instance, which must be the one it claims. */
  private reregister(credential: string, request: RegisterRequest): Registration {
    const instance = this.options.store.instanceForWorkerToken(credential);
    if (instance === undefined)
      throw new WorkerProtocolError(
        401,
        'unknown per-instance token: register with the instance’s launch credential (a token is only known once issued)',
      );
    if (instance.cloudId !== request.instanceId)
      throw new WorkerProtocolError(
        403,
        `this per-instance token belongs to another instance (${instance.id})`,
      );
    refuseIfGone(instance);
    this.options.store.appendEvent({
      kind: 'worker.reregistered',
      instanceId: instance.id,
      message: `worker on ${request.instanceId} re-registered with its per-instance token (${describeWorker(request)})`,
      data: { cloudId: request.instanceId, executor: request.executor },
    });
    return { instance, workerToken: credential, how: 're-registration' };
  }

  private async registerWithLaunchSecret(
    credential: string,
    request: RegisterRequest,
  ): Promise<Registration> {
    if (this.options.launchCredential.kind !== 'launch-secret')
      throw new WorkerProtocolError(
        401,
        `this cluster's workers prove their instance with ${this.options.launchCredential.kind}, not a launch secret`,
      );
    const cloud = await this.options.describeInstance(request.instanceId);
    const launchToken = cloud?.tags[TAG_LAUNCH_TOKEN] ?? request.instanceId;
    // Compared even for an unknown instance, so the answer's timing does not tell which instance ids exist.
    const valid = tokensEqual(credential, launchSecretFor(this.options.clusterKey, launchToken));
    if (cloud === undefined || !valid)
      throw new WorkerProtocolError(401, `invalid launch secret for instance ${request.instanceId}`);
    return this.claim(request, cloud);
  }

  private async registerWithIdentityDocument(
    credential: string,
    request: RegisterRequest,
    identity: Extract<WorkerIdentity, { kind: 'ec2-instance-identity' }>,
  ): Promise<Registration> {
    const check = this.options.launchCredential;
    if (check.kind !== 'ec2-instance-identity')
      throw new WorkerProtocolError(
        401,
        'this cluster does not run on EC2: no instance identity document applies',
      );
    if (!tokensEqual(credential, this.options.clusterKey))
      throw new WorkerProtocolError(401, 'invalid worker token');
    let document: Ec2IdentityDocument;
    try {
      document = await check.verifier.verify(identity.document, identity.rsa2048);
    } catch (e) {
      if (e instanceof IdentityDocumentError)
        throw new WorkerProtocolError(401, `instance identity document refused: ${e.message}`);
      throw e;
    }
    const mismatch = (what: string, signed: string, expected: string): never => {
      throw new WorkerProtocolError(
        403,
        `instance identity document refused: it is signed for ${what} ${signed}, not ${expected}`,
      );
    };
    if (document.instanceId !== request.instanceId)
      mismatch('instance', document.instanceId, request.instanceId);
    if (document.region !== check.region) mismatch('region', document.region, check.region);
    const cloud = await this.options.describeInstance(document.instanceId);
    if (cloud === undefined)
      throw new WorkerProtocolError(
        403,
        `no instance ${document.instanceId} tagged ${TAG_CLUSTER}=${this.options.clusterName} in ${check.region}`,
      );
    if (cloud.accountId !== undefined && document.accountId !== cloud.accountId)
      mismatch('account', document.accountId, cloud.accountId);
    if (cloud.imageId !== undefined && document.imageId !== cloud.imageId)
      mismatch('image', document.imageId, cloud.imageId);
    if (document.instanceType !== cloud.typeName) mismatch('type', document.instanceType, cloud.typeName);
    if (!LIVE_CLOUD_STATES.has(cloud.state))
      throw new WorkerProtocolError(410, `instance ${cloud.instanceId} is ${cloud.state} in EC2`);
    return this.claim(request, cloud);
  }

  /**
   * The launch credential checked out: give the instance its worker, once. Synchronous from the look-ups to the token
   * being stored, so two registrations racing for one instance cannot both pass.
   */
  private claim(request: RegisterRequest, cloud: CloudInstance): Registration {
    const store = this.options.store;
    const instance = store.findInstanceByCloudId(cloud.instanceId);
    if (instance === undefined)
      throw new WorkerProtocolError(
        409,
        `instance ${cloud.instanceId} is not in the controller's state (its launch is still being recorded, or it is ` +
          'an orphan kept aside); retry',
      );
    refuseIfGone(instance);
    if (cloud.tags[TAG_CLUSTER] !== this.options.clusterName)
      throw new WorkerProtocolError(403, `instance ${cloud.instanceId} is not tagged with this cluster`);
    const tagged = cloud.tags[TAG_LAUNCH_TOKEN];
    if (instance.launchToken !== tagged && instance.launchToken !== adoptedLaunchToken(cloud.instanceId))
      throw new WorkerProtocolError(
        403,
        `instance ${cloud.instanceId} was not launched for ${instance.id} (its launch token differs from the record's)`,
      );
    const proposed = request.proposedToken;
    const holder = proposed === undefined ? undefined : store.instanceForWorkerToken(proposed);
    if (instance.workerTokenHash !== undefined) {
      // The same worker asking again (its first answer was lost): the registration stands, answered once more.
      if (proposed !== undefined && holder?.id === instance.id)
        return { instance, workerToken: proposed, how: 'launch' };
      throw new WorkerProtocolError(
        409,
        `instance ${cloud.instanceId} (${instance.id}) already has a registered worker: a launch credential ` +
          'registers an instance once; a restarted worker re-registers with the per-instance token it saved ' +
          '(worker-credential.json in its work directory)',
      );
    }
    if (holder !== undefined)
      throw new WorkerProtocolError(409, 'the proposed per-instance token is taken: propose another');
    const workerToken = proposed ?? newWorkerToken();
    const registered = store.transaction(() => {
      const updated = store.setWorkerToken(instance.id, workerToken);
      store.appendEvent({
        kind: 'worker.registered',
        instanceId: instance.id,
        message: `worker on ${request.instanceId} registered (${describeWorker(request)})`,
        data: {
          cloudId: request.instanceId,
          executor: request.executor,
          identity: request.identity?.kind ?? 'none',
        },
      });
      return updated;
    });
    return { instance: registered, workerToken, how: 'launch' };
  }
}

function refuseIfGone(instance: InstanceRecord): void {
  if (instance.state === 'terminating' || instance.state === 'terminated')
    throw new WorkerProtocolError(
      410,
      `instance ${instance.cloudId ?? instance.id} (${instance.id}) is ${instance.state}`,
    );
}

function describeWorker(request: RegisterRequest): string {
  return [
    `${request.executor} executor`,
    request.identity === undefined ? undefined : `proved by ${request.identity.kind}`,
    request.hostname === undefined ? undefined : `host ${request.hostname}`,
  ]
    .filter((part) => part !== undefined)
    .join(', ');
}
