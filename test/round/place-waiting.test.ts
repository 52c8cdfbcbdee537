import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { findType } from '../../src/core/catalog.js';
import { placeWaitingJobs, type WaitingJobFacts } from '../../src/round/place-waiting.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';

const catalog = loadCatalogFile();
const prices = new PriceBook(catalog);
const c7i = findType(catalog, 'c7i.2xlarge');

/** One task of 4 vCPU: half a c7i.2xlarge, so the instance's free half takes one of them. */
const waiting = (id: string, taskSeconds: number): WaitingJobFacts => ({
  id,
  taskSeconds,
  tasks: [{ id: `${id}/t0`, demand: { c7i: [0, 4, 8] }, key: `${id}_node0` }],
});
const jobs = [waiting('long', 36_000), waiting('short', 600)];
const occupant = [{ demand: { c7i: [0, 4, 8] as [number, number, number] }, key: 'occupant_node0' }];

/** The jobs placed, in order, on a running instance whose free half takes one of them, when admission lets `admitted` in. */
const place = (admitted: readonly string[]): string[] =>
  placeWaitingJobs({
    nowSeconds: 100,
    jobs,
    instances: [{ id: 'i-1', type: c7i, readyAtSeconds: 100, tasks: occupant }],
    prices,
    admitted: () => admitted,
    bind: false,
    capHoldsJobsBack: true,
  }).map((p) => p.jobId);

describe('placing waiting jobs between rounds in the order admission lets them in', () => {
  it('gives the room an instance frees to the first job admission lets in', () => {
    expect(place(['short', 'long'])).toEqual(['short']);
    expect(place(['long', 'short'])).toEqual(['long']);
  });

  it('places no job admission keeps out, and keeps no room for it', () => {
    // 'long' waits for the caps: 'short' takes the room; nothing admitted, nothing placed.
    expect(place(['short'])).toEqual(['short']);
    expect(place([])).toEqual([]);
  });

  it('binds a job to an instance still coming up when it is ready before a launch would be', () => {
    // Ready 100 s from now, before a c7i.2xlarge launched now would be (its setup takes longer): worth binding to.
    const booting = [{ id: 'i-boot', type: c7i, readyAtSeconds: 200, tasks: occupant }];
    const placed = placeWaitingJobs({
      nowSeconds: 100,
      jobs,
      instances: booting,
      prices,
      admitted: () => ['short', 'long'],
      bind: true,
      capHoldsJobsBack: true,
    });
    expect(placed.map((p) => p.jobId)).toEqual(['short']);
    expect(placed[0]?.jobStartSeconds).toBe(200);
    expect(placed[0]?.bindChoice?.choice).toBe('bind');
  });

  it('binds a job of several tasks by the launch of its slowest task, whatever order its tasks come in', () => {
    // A launch for the job buys a p3.2xlarge (173 s to set up) for its CPU-heavy task and a p3.8xlarge (229 s) for its
    // 4-GPU one, and the job starts when the slower is up: a p3.16xlarge ready in 200 s starts it sooner.
    const cpu = { id: 'j/0', demand: { any: [1, 8, 61] as [number, number, number] }, key: 'j_node0' };
    const gpu = { id: 'j/1', demand: { any: [4, 32, 244] as [number, number, number] }, key: 'j_node1' };
    const bound = (tasks: WaitingJobFacts['tasks'], readyAtSeconds = 300) =>
      placeWaitingJobs({
        nowSeconds: 100,
        jobs: [{ id: 'j', taskSeconds: 3600, tasks }],
        instances: [{ id: 'i-boot', type: findType(catalog, 'p3.16xlarge'), readyAtSeconds, tasks: [] }],
        prices,
        admitted: () => ['j'],
        bind: true,
        capHoldsJobsBack: true,
      }).map((p) => ({ instances: p.placements.map((x) => x.instanceId), choice: p.bindChoice?.choice }));
    const onBooting = [{ instances: ['i-boot', 'i-boot'], choice: 'bind' }];
    expect(bound([cpu, gpu])).toEqual(onBooting);
    expect(bound([gpu, cpu])).toEqual(onBooting);
    // Ready after the slower launch would be: the job waits for the round, which launches its own.
    expect(bound([cpu, gpu], 100 + 240)).toEqual([]);
  });

  it('leaves a spot: never job for the round while the paid capacity has a spot instance', () => {
    const never = { ...waiting('short', 600), onDemandOnly: true };
    const place = (spot: boolean) =>
      placeWaitingJobs({
        nowSeconds: 100,
        jobs: [waiting('long', 36_000), never],
        instances: [{ id: 'i-1', type: c7i, readyAtSeconds: 100, tasks: occupant, spot }],
        prices,
        admitted: () => ['short', 'long'],
        bind: false,
        capHoldsJobsBack: true,
      }).map((p) => p.jobId);
    // On demand, srpt gives the free half to the short job; on a spot instance the short job may not go there.
    expect(place(false)).toEqual(['short']);
    expect(place(true)).toEqual(['long']);
  });
});
