import {
  StateStoreError,
  UnknownRecordError,
  type InstanceChange,
  type InstanceFilter,
  type InstanceRecord,
  type InstanceState,
  type NewInstance,
} from '../../state-store.js';
import { instanceIdOf, newInstanceRecord, transitionInstance, type Change } from '../lifecycle.js';
import { checkRawToken, hashToken } from '../tokens.js';
import { Where, type SqlConnection } from './connection.js';
import type { EventQueries } from './events.js';
import { RecordCache } from './record-cache.js';
import { instanceFromRow } from './rows.js';

/** Instance records kept in memory (record-cache.ts). */
const INSTANCE_CACHE_SIZE = 20_000;

/** Instances and their worker tokens. */
export class InstanceQueries {
  private readonly cache: RecordCache<InstanceRecord>;

  constructor(
    private readonly connection: SqlConnection,
    private readonly events: EventQueries,
    private readonly storeId: string,
  ) {
    this.cache = new RecordCache(connection, INSTANCE_CACHE_SIZE);
  }

  createInstance(input: NewInstance): InstanceRecord {
    return this.connection.transaction(() => {
      const seq = this.connection.nextNumber('instances');
      const { record, event } = newInstanceRecord(
        instanceIdOf(seq),
        input,
        this.storeId,
        this.connection.now(),
      );
      if (
        this.connection.get('SELECT 1 FROM instances WHERE launch_token = ?', record.launchToken) !==
        undefined
      )
        throw new StateStoreError(`launch token ${record.launchToken} is already used`);
      this.connection.run(
        `INSERT INTO instances (seq, id, type_name, state, availability_zone, placement_group, launch_token,
           requested_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        seq,
        record.id,
        record.typeName,
        record.state,
        record.availabilityZone ?? null,
        record.placementGroup ?? null,
        record.launchToken,
        record.requestedAtSeconds,
        record.updatedAtSeconds,
      );
      if (event !== undefined) this.events.emit(event, this.connection.now());
      return this.existing(record.id);
    });
  }

  getInstance(id: string): InstanceRecord | undefined {
    const cached = this.cache.get(id);
    if (cached !== undefined) return cached;
    const row = this.connection.get('SELECT * FROM instances WHERE id = ?', id);
    return row === undefined ? undefined : this.cache.remember(id, instanceFromRow(row));
  }

  findInstanceByCloudId(cloudId: string): InstanceRecord | undefined {
    const row = this.connection.get('SELECT * FROM instances WHERE cloud_id = ?', cloudId);
    return row === undefined ? undefined : instanceFromRow(row);
  }

  listInstances(filter: InstanceFilter = {}): InstanceRecord[] {
    const where = new Where();
    where.in('state', filter.states);
    return this.connection
      .all(`SELECT * FROM instances ${where.sql()} ORDER BY seq`, ...where.params)
      .map(instanceFromRow);
  }

  setInstanceState(id: string, state: InstanceState, change: InstanceChange = {}): InstanceRecord {
    return this.connection.transaction(() => {
      const instance = this.existing(id);
      if (change.cloudId !== undefined) {
        const other = this.findInstanceByCloudId(change.cloudId);
        if (other !== undefined && other.id !== id)
          throw new StateStoreError(`cloud id ${change.cloudId} already belongs to instance ${other.id}`);
      }
      return this.apply(transitionInstance(instance, state, change, this.connection.now()));
    });
  }

  setWorkerToken(instanceId: string, rawToken: string): InstanceRecord {
    checkRawToken(rawToken);
    return this.connection.transaction(() => {
      const instance = this.existing(instanceId);
      const hash = hashToken(rawToken);
      const other = this.connection.get('SELECT id FROM instances WHERE worker_token_hash = ?', hash);
      if (other !== undefined && other['id'] !== instanceId)
        throw new StateStoreError('this worker token is already used by another instance');
      return this.apply({
        record: { ...instance, workerTokenHash: hash, updatedAtSeconds: this.connection.now() },
      });
    });
  }

  instanceForWorkerToken(rawToken: string): InstanceRecord | undefined {
    const row = this.connection.get(
      'SELECT * FROM instances WHERE worker_token_hash = ?',
      hashToken(rawToken),
    );
    return row === undefined ? undefined : instanceFromRow(row);
  }

  private apply(change: Change<InstanceRecord>): InstanceRecord {
    const i = change.record;
    this.cache.forget(i.id);
    this.connection.run(
      `UPDATE instances SET state = ?, cloud_id = ?, availability_zone = ?, placement_group = ?, launched_at = ?,
         running_at = ?, terminated_at = ?, updated_at = ?, worker_token_hash = ?, reason = ? WHERE id = ?`,
      i.state,
      i.cloudId ?? null,
      i.availabilityZone ?? null,
      i.placementGroup ?? null,
      i.launchedAtSeconds ?? null,
      i.runningAtSeconds ?? null,
      i.terminatedAtSeconds ?? null,
      i.updatedAtSeconds,
      i.workerTokenHash ?? null,
      i.reason ?? null,
      i.id,
    );
    if (change.event !== undefined) this.events.emit(change.event, this.connection.now());
    return this.existing(i.id);
  }

  /** The instance, which must exist. */
  existing(id: string): InstanceRecord {
    const instance = this.getInstance(id);
    if (instance === undefined) throw new UnknownRecordError('instance', id);
    return instance;
  }
}
