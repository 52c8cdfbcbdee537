import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { hashToken } from '../../src/controller/state/tokens.js';
import type { RoundInput } from '../../src/controller/state-store.js';

/**
 * The memory store keeps its tables in state/memory/, each writing through the store's own `transaction`: a store
 * that wraps `transaction` (tests fail a commit this way, co-start-barrier.test.ts) wraps every write, also one made
 * outside any transaction, which then commits or is undone whole.
 */
const catalog = loadCatalogFile();
const RESNET = parseJobSpec(
  readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml'), 'utf8'),
  'resnet.yaml',
  catalog,
);
const TOKEN = 'team-token-0123456789abcdef';
const OTHER_TOKEN = 'team-token-fedcba9876543210';
const WORKER_TOKEN = 'worker-token-0123456789abcdef';
const ROUND: RoundInput = {
  configuration: { instances: [] },
  decision: {
    scheduler: 'eva',
    nowSeconds: 0,
    candidates: [],
    chosen: 'partial',
    reason: 'test',
    waiting: [],
    pinned: [],
  },
};

/** Its outermost transactions fail as they would commit while `refuse` is set (their writes undone). */
class RefusingStore extends MemoryStateStore {
  refuse = false;
  private depth = 0;

  override transaction<T>(fn: () => T): T {
    this.depth += 1;
    try {
      return super.transaction(() => {
        const result = fn();
        if (this.depth === 1 && this.refuse) throw new Error('commit refused');
        return result;
      });
    } finally {
      this.depth -= 1;
    }
  }
}

/** A store with a record of every kind: a job and its task, an instance, an intent done, a round, a token, a value. */
function populated(): RefusingStore {
  let clock = 1000;
  const store = new RefusingStore({ nowSeconds: () => clock, storeId: 'test' });
  store.submitJob(RESNET);
  const inst = store.createInstance({ typeName: 'p3.2xlarge' });
  const done = store.recordIntent({ kind: 'terminate', payload: { instanceId: inst.id } });
  store.completeIntent(done.id);
  store.recordIntent({ kind: 'terminate', payload: { instanceId: 'inst-9' } }, { key: 'pending' });
  store.recordRound(ROUND);
  store.addTeamToken('research', TOKEN);
  store.setValue('learned', { rounds: 1 });
  clock = 2000;
  return store;
}

/** Everything the store holds, as its readers see it (ids given next included: a refused write gives its ids back). */
function contents(store: MemoryStateStore): string {
  return JSON.stringify({
    jobs: store.listJobs(),
    tasks: store.listTasks(),
    counts: store.countByState(),
    instances: store.listInstances(),
    byWorkerToken: store.instanceForWorkerToken(WORKER_TOKEN) ?? null,
    intents: store.listIntents(),
    pending: store.listIntents({ states: ['pending'] }),
    byKey: store.getIntentByKey('pending') ?? null,
    rounds: store.listRounds(),
    events: store.listEvents(),
    tokens: store.listTeamTokens(),
    team: store.teamForToken(TOKEN) ?? null,
    values: [store.getValue('learned') ?? null, store.getValue('other') ?? null],
  });
}

const WRITES: readonly (readonly [string, (store: MemoryStateStore) => unknown])[] = [
  ['submitJob', (s) => s.submitJob(RESNET)],
  ['submitJob with a kept id', (s) => s.submitJob(RESNET, { id: 'job-7', submittedAtSeconds: 10 })],
  ['setJobState', (s) => s.setJobState('job-1', 'cancelled', 'test')],
  ['countMigration', (s) => s.countMigration('job-1')],
  ['recordJobProgress', (s) => s.recordJobProgress('job-1', 5, 10)],
  ['retryJob', (s) => s.retryJob('job-1', { taskId: 'job-1.0', reason: 'test' }, 'again')],
  ['setTaskState', (s) => s.setTaskState('job-1.0', 'starting', 'inst-1')],
  ['recordCheckpoint', (s) => s.recordCheckpoint('job-1.0', 'checkpoints/job-1/1', 1500)],
  ['createInstance', (s) => s.createInstance({ typeName: 'c7i.large' })],
  ['setInstanceState', (s) => s.setInstanceState('inst-1', 'launching', { cloudId: 'i-1' })],
  ['setWorkerToken', (s) => s.setWorkerToken('inst-1', WORKER_TOKEN)],
  ['recordIntent', (s) => s.recordIntent({ kind: 'terminate', payload: { instanceId: 'inst-1' } })],
  ['completeIntent', (s) => s.completeIntent(2)],
  ['failIntent', (s) => s.failIntent(2, 'test')],
  ['pruneFinishedIntents', (s) => s.pruneFinishedIntents(3000, 10)],
  ['recordRound', (s) => s.recordRound(ROUND)],
  ['pruneRounds', (s) => s.pruneRounds(0)],
  ['appendEvent', (s) => s.appendEvent({ kind: 'note', message: 'test' })],
  ['pruneEvents', (s) => s.pruneEvents('job.submitted', 3000, 10)],
  ['addTeamToken', (s) => s.addTeamToken('research', OTHER_TOKEN)],
  ['revokeTeamToken', (s) => s.revokeTeamToken(TOKEN)],
  ['revokeTeamTokenByPrefix', (s) => s.revokeTeamTokenByPrefix(hashToken(TOKEN).slice(0, 12))],
  ['setValue', (s) => s.setValue('other', [1, 2])],
  ['deleteValue', (s) => s.deleteValue('learned')],
];

describe('MemoryStateStore with a wrapped transaction', () => {
  it.each(WRITES)('%s goes through it: refused, it leaves the store as it was', (_name, write) => {
    const refused = populated();
    const before = contents(refused);
    refused.refuse = true;
    expect(() => write(refused)).toThrow('commit refused');
    refused.refuse = false;
    expect(contents(refused)).toBe(before);

    // Committed, the same write changes what the store holds: the comparison above could see it.
    const committed = populated();
    write(committed);
    expect(contents(committed)).not.toBe(before);
  });

  it('gives back the job ids a refused reservation claimed', () => {
    const store = populated();
    store.refuse = true;
    expect(() => store.reserveJobIds(50)).toThrow('commit refused');
    store.refuse = false;
    expect(store.submitJob(RESNET).id).toBe('job-2');
    store.reserveJobIds(50);
    expect(store.submitJob(RESNET).id).toBe('job-51');
  });
});
