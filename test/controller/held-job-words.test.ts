import { describe, expect, it } from 'vitest';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { readQueueRecord } from '../../src/controller/queue-records.js';
import { CPU_SMALL, jobSpec, rig, ScriptedExits, type Rig } from './controller-fixtures.js';

/**
 * What the controller says of a job held for its dependencies, through the real controller and its predictions: the
 * ETA's basis names what it waits for summarised (an array may wait for all of another: a basis naming 1,000 ids in
 * each of 1,000 jobs made `jobs --json` 59 MB), and `why` names, at each round, only the dependencies that had not
 * succeeded by then, as `jobs` and `job` name only those not succeeded now.
 */

function after(spec: JobSpec, ...dependsOn: string[]): JobSpec {
  return { ...spec, dependsOn };
}

/** Rounds and reconcile passes, 10 s apart, until `done` or 40 passes. */
async function passes(r: Rig, done: () => boolean): Promise<void> {
  for (let pass = 0; pass < 40 && !done(); pass++) {
    await r.controller.runRound('test');
    await r.controller.reconcile();
    r.clock.advance(10);
  }
}

describe('a job held for its dependencies', () => {
  it("has its ETA's basis name them summarised, at submission too", async () => {
    const r = rig({}, { tasks: new ScriptedExits(new Map()) });
    const sized = (name: string) => jobSpec(name, CPU_SMALL, { expectedDurationSeconds: 600 });
    const upstream = Array.from({ length: 6 }, (_, i) => r.controller.submit(sized(`up${i}`), 'research').id);
    const gather = r.controller.submit(after(sized('gather'), ...upstream), 'research');
    // Not consecutive: the first three and how many more.
    const some = r.controller.submit(after(sized('some'), ...upstream.filter((_, i) => i !== 1)), 'research');
    await r.controller.predictionsSettled();
    const basis = (id: string) => readQueueRecord(r.store, id)?.eta?.basis;
    const [first, second, third, , , last] = upstream;
    expect(basis(gather.id)).toContain(`; held until ${first} … ${last} (6 jobs) succeed; `);
    expect(readQueueRecord(r.store, gather.id)?.submissionEta?.basis).toContain(
      `held until ${first} … ${last} (6 jobs) succeed`,
    );
    expect(basis(some.id)).toContain(`; held until ${first}, ${third}, ${upstream[3]} and 2 more succeed; `);
    expect(basis(some.id)).not.toContain(`${second}`);
  });

  it('is said in why to be held for the dependencies not yet succeeded at each round', async () => {
    const control = new ScriptedExits(new Map([['job-1.0', [0]]]));
    const r = rig({}, { tasks: control });
    control.store = r.store;
    const done = r.controller.submit(jobSpec('done', CPU_SMALL), 'research');
    const blocker = r.controller.submit(jobSpec('blocker', CPU_SMALL), 'research');
    const held = r.controller.submit(after(jobSpec('held', CPU_SMALL), done.id, blocker.id), 'research');
    await r.controller.runRound('test');
    r.clock.advance(10);
    const both = `held for its dependencies (${done.id}, ${blocker.id}): out of the round until they succeed`;
    expect(r.controller.why(held.id).map((w) => w.summary)).toEqual([both]);
    await passes(r, () => r.store.getJob(done.id)?.state === 'succeeded');
    expect(r.store.getJob(done.id)?.state).toBe('succeeded');
    r.clock.advance(10);
    await r.controller.runRound('test');
    const summaries = r.controller.why(held.id).map((w) => w.summary);
    // Newest first: the round after it succeeded names only the one still to succeed; the first round named both.
    expect(summaries[0]).toBe(`held for its dependency ${blocker.id}: out of the round until it succeeds`);
    expect(summaries.at(-1)).toBe(both);
    expect(r.store.getJob(held.id)?.state).toBe('queued');
  });
});
