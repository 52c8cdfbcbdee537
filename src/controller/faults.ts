/** Named points between an intent and its effect, where tests inject a crash (and restart the controller). */
export const FAULT_POINTS = [
  'round:planned',
  'round:committed',
  'launch:before-call',
  'launch:after-call',
  'stop:before-call',
  'stop:after-call',
  'start:before-call',
  'start:after-call',
  'terminate:before-call',
  'terminate:after-call',
  'orphan:recorded',
] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

export interface FaultInjector {
  /** Called at each point; throwing (InjectedCrash) or exiting the process simulates a crash there. */
  hit(point: FaultPoint, detail: string): void;
}

/** Thrown by fault injectors; never caught by the reconciler's error handling. */
export class InjectedCrash extends Error {
  constructor(readonly point: FaultPoint) {
    super(`injected crash at ${point}`);
    this.name = 'InjectedCrash';
  }
}
