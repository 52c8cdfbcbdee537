import type { BuildSpec, JobSpec, TaskTemplateSpec } from './spec.js';

/** One task of a job after expanding replicas: what the store keeps a row for and the scheduler places. */
export interface ExpandedTask {
  readonly index: number;
  readonly templateIndex: number;
  readonly replica: number;
  /** `<template>` for a single replica, `<template>-<replica>` otherwise. */
  readonly name: string;
  /** Co-location key (the throughput table is keyed by it). */
  readonly workloadKey: string;
  readonly template: TaskTemplateSpec;
}

/**
 * Default co-location identity: the image (or build context) and command, which decide how a task uses the machine.
 * Env is left out on purpose: it often carries run ids or secrets that differ per run of the same workload.
 * Readable prefix + FNV-1a hash, e.g. `pytorch-3fa2c1d9`.
 */
export function derivedWorkload(t: {
  readonly image?: string | undefined;
  readonly build?: BuildSpec | undefined;
  readonly command?: readonly string[] | undefined;
}): string {
  const origin = t.image ?? `build:${t.build?.context ?? ''}:${t.build?.dockerfile ?? ''}`;
  const identity = JSON.stringify([origin, t.command ?? []]);
  const base =
    t.image !== undefined
      ? (t.image.split('@')[0] ?? '').split('/').pop()?.split(':')[0]
      : (t.build?.context ?? '').replace(/\/+$/, '').split('/').pop();
  const prefix = (base ?? '').toLowerCase().replace(/[^a-z0-9._-]/g, '') || 'task';
  return `${prefix.slice(0, 40)}-${fnv1a32(identity)}`;
}

function fnv1a32(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/** The job's tasks after expanding replicas, indexed 0…n−1 in template order. */
export function expandTasks(spec: JobSpec): ExpandedTask[] {
  const out: ExpandedTask[] = [];
  spec.tasks.forEach((template, templateIndex) => {
    for (let replica = 0; replica < template.replicas; replica++)
      out.push({
        index: out.length,
        templateIndex,
        replica,
        name: template.replicas === 1 ? template.name : `${template.name}-${replica}`,
        workloadKey: template.workload,
        template,
      });
  });
  return out;
}
