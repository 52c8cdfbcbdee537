import { describe, expect, it } from 'vitest';
import { inNoMoveWindow, progressSinceSeconds, type SchedJob } from '../../src/core/model.js';

const job: SchedJob = {
  id: 'j',
  taskIds: ['j.0'],
  reconfigurable: true,
  arrivalSeconds: 0,
  migrationDelaySeconds: 0,
};

describe("a job's progress start and no-move window", () => {
  it('has made no progress while it initializes (its progress start still ahead) nor before it runs', () => {
    expect(progressSinceSeconds({ ...job, runningSinceSeconds: 1060 }, 1000)).toBeUndefined();
    expect(progressSinceSeconds({ ...job, runningSinceSeconds: 1000 }, 1000)).toBe(1000);
    expect(progressSinceSeconds({ ...job, runningSinceSeconds: 900 }, 1000)).toBe(900);
    expect(progressSinceSeconds(job, 1000)).toBeUndefined();
  });

  it('holds a job through its init and for noMoveSeconds after, and not one that never ran', () => {
    const asked = { ...job, noMoveSeconds: 600 };
    expect(inNoMoveWindow({ ...asked, runningSinceSeconds: 1060 }, 1000)).toBe(true); // initializing
    expect(inNoMoveWindow({ ...asked, runningSinceSeconds: 1060 }, 1659)).toBe(true);
    expect(inNoMoveWindow({ ...asked, runningSinceSeconds: 1060 }, 1660)).toBe(false);
    expect(inNoMoveWindow(asked, 1000)).toBe(false); // never ran
    expect(inNoMoveWindow({ ...job, runningSinceSeconds: 1060 }, 1000)).toBe(false); // asked for nothing
  });
});
