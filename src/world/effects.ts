import { progressStartSeconds } from '../core/model.js';
import { checkpointUploaded, keepCheckpointsAtStop } from './checkpoints.js';
import { taskDemandOn, type SimInstance, type SimJob, type SimTask } from './entities.js';
import type { EffectEvent, WorldState } from './world-state.js';

/**
 * The delayed effects of commands (Eva's simulator: the events a command schedules): an instance comes up step by
 * step or goes, a task finishes launching, is killed or has uploaded its checkpoint, a job becomes active. An
 * effect that a later change made moot (the job finished, a kill cancelled an activation) is ignored.
 */
export function handleEffect(state: WorldState, e: EffectEvent): void {
  switch (e.kind) {
    case 'instantiated':
      return onInstantiated(state, e.instance);
    case 'worker-started':
      if (e.instance.lifecycle === 'starting-worker') {
        e.instance.lifecycle = 'registering';
        state.log('worker-started', { instanceId: e.instance.id });
        state.at(e.instance.type.delays.workerRegisterSeconds, {
          kind: 'registered',
          instance: e.instance,
        });
      }
      return;
    case 'registered':
      if (e.instance.lifecycle === 'registering') {
        e.instance.lifecycle = 'running';
        state.log('registered', { instanceId: e.instance.id });
      }
      return;
    case 'terminated':
      return onTerminated(state, e.instance);
    case 'launched':
      return onLaunched(state, e.task);
    case 'killed':
      return onKilled(state, e.task);
    case 'uploaded':
      return onUploaded(state, e.task);
    case 'job-active':
      return onJobActive(state, e.job, e.token);
  }
}

function onInstantiated(state: WorldState, inst: SimInstance): void {
  if (inst.lifecycle === 'terminated') return; // terminated before it came up: never billed
  state.log('instantiated', { instanceId: inst.id });
  inst.billedFromSeconds = state.now;
  state.meter.startBilling(inst.type, inst.pricePerHour);
  state.spot?.onBilled(inst);
  if (inst.lifecycle === 'instantiating') {
    inst.lifecycle = 'starting-worker';
    state.at(inst.type.delays.workerStartSeconds, { kind: 'worker-started', instance: inst });
  }
}

function onTerminated(state: WorldState, inst: SimInstance): void {
  inst.lifecycle = 'terminated';
  state.launched.delete(inst);
  state.log('terminated', { instanceId: inst.id });
  if (inst.billedFromSeconds !== undefined)
    state.meter.stopBilling(
      inst.type,
      inst.pricePerHour,
      state.now - inst.billedFromSeconds,
      inst.market === 'spot',
    );
  inst.billedFromSeconds = undefined;
}

function onLaunched(state: WorldState, task: SimTask): void {
  if (task.state !== 'launching') return; // the job finished meanwhile
  const inst = task.occupying as SimInstance;
  task.state = 'running';
  state.log('launched', { jobId: task.job.spec.id, taskId: task.id, instanceId: inst.id });
  inst.images.add(task.spec.imageId);
  state.dirtyInstances.add(inst);
  task.readySeconds = state.now;
  const job = task.job;
  if (job.tasks.every((t) => t.state === 'running')) {
    state.starts.releaseJob(
      job,
      (t) => {
        const on = t.occupying;
        return on === undefined
          ? undefined
          : { type: on.type, demand: taskDemandOn(t, on), pricePerHour: on.pricePerHour };
      },
      state.now,
    );
    // All tasks run: the job is reconfigurable again and makes progress after init_delay (gang start).
    job.status = 'executing';
    job.progressFromSeconds = progressStartSeconds(state.now, job.spec.initDelaySeconds);
    job.activationToken += 1;
    state.at(job.spec.initDelaySeconds, { kind: 'job-active', job, token: job.activationToken });
  }
}

function onJobActive(state: WorldState, job: SimJob, token: number): void {
  if (token !== job.activationToken || job.status === 'finished') return;
  // It resumed from a checkpoint holding exactly the progress it has (a move checkpoints: nothing is lost).
  job.checkpointIterations = job.completedIterations;
  job.active = true;
  job.activeSinceSeconds = state.now;
  job.startSeconds ??= state.now;
  state.log('job-active', { jobId: job.spec.id });
  state.dirtyJobs.add(job);
}

function onKilled(state: WorldState, task: SimTask): void {
  if (task.state !== 'killing') return;
  task.state = 'uploading';
  state.log('killed', { jobId: task.job.spec.id, taskId: task.id, instanceId: task.occupying?.id });
  state.dirtyInstances.add(task.occupying as SimInstance);
  const job = task.job;
  job.activationToken += 1; // a pending JobBecomesActive is cancelled (reference KillTaskCompleteEvent)
  keepCheckpointsAtStop(job, state.now);
  if (job.active) {
    job.active = false;
    job.activeSinceSeconds = undefined;
  }
  state.dirtyJobs.add(job);
  state.at(task.spec.uploadDelaySeconds, { kind: 'uploaded', task });
}

function onUploaded(state: WorldState, task: SimTask): void {
  if (task.state !== 'uploading') return;
  task.state = 'stopped';
  state.log('uploaded', { jobId: task.job.spec.id, taskId: task.id, instanceId: task.occupying?.id });
  state.release(task);
  const job = task.job;
  checkpointUploaded(job);
  if (job.requeueAfterStop && job.tasks.every((t) => t.state === 'stopped')) {
    job.requeueAfterStop = false;
    job.status = 'queued';
  }
}
