import {
  StateStoreError,
  UnknownRecordError,
  type InstanceChange,
  type InstanceFilter,
  type InstanceRecord,
  type InstanceState,
  type NewInstance,
} from '../../state-store.js';
import { instanceIdOf, newInstanceRecord, transitionInstance } from '../lifecycle.js';
import { checkRawToken, hashToken } from '../tokens.js';
import type { MemoryEvents } from './events.js';
import type { MemoryTransactions, Transact } from './transactions.js';

/** The memory store's instances and their worker tokens. */
export class MemoryInstances {
  private readonly instances = new Map<string, InstanceRecord>();

  constructor(
    private readonly tx: MemoryTransactions,
    private readonly transaction: Transact,
    private readonly events: MemoryEvents,
    /** Prefix of default launch tokens. */
    private readonly storeId: string,
  ) {}

  createInstance(input: NewInstance): InstanceRecord {
    return this.transaction(() => {
      const change = newInstanceRecord(
        instanceIdOf(this.tx.next('instance')),
        input,
        this.storeId,
        this.tx.now(),
      );
      if ([...this.instances.values()].some((i) => i.launchToken === change.record.launchToken))
        throw new StateStoreError(`launch token ${change.record.launchToken} is already used`);
      return this.events.applyChange(this.instances, change);
    });
  }

  getInstance(id: string): InstanceRecord | undefined {
    return this.instances.get(id);
  }

  /** The instance with this id; UnknownRecordError when there is none. */
  existing(id: string): InstanceRecord {
    const instance = this.instances.get(id);
    if (instance === undefined) throw new UnknownRecordError('instance', id);
    return instance;
  }

  findInstanceByCloudId(cloudId: string): InstanceRecord | undefined {
    return [...this.instances.values()].find((i) => i.cloudId === cloudId);
  }

  listInstances(filter: InstanceFilter = {}): InstanceRecord[] {
    return [...this.instances.values()].filter(
      (i) => filter.states === undefined || filter.states.includes(i.state),
    );
  }

  setInstanceState(id: string, state: InstanceState, change: InstanceChange = {}): InstanceRecord {
    return this.transaction(() => {
      const instance = this.existing(id);
      if (change.cloudId !== undefined) {
        const other = this.findInstanceByCloudId(change.cloudId);
        if (other !== undefined && other.id !== id)
          throw new StateStoreError(`cloud id ${change.cloudId} already belongs to instance ${other.id}`);
      }
      return this.events.applyChange(
        this.instances,
        transitionInstance(instance, state, change, this.tx.now()),
      );
    });
  }

  setWorkerToken(instanceId: string, rawToken: string): InstanceRecord {
    checkRawToken(rawToken);
    return this.transaction(() => {
      const instance = this.existing(instanceId);
      const hash = hashToken(rawToken);
      if ([...this.instances.values()].some((i) => i.workerTokenHash === hash && i.id !== instanceId))
        throw new StateStoreError('this worker token is already used by another instance');
      return this.events.applyChange(this.instances, {
        record: { ...instance, workerTokenHash: hash, updatedAtSeconds: this.tx.now() },
      });
    });
  }

  instanceForWorkerToken(rawToken: string): InstanceRecord | undefined {
    const hash = hashToken(rawToken);
    return [...this.instances.values()].find((i) => i.workerTokenHash === hash);
  }
}
