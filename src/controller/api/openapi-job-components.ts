import { INSTANCE_STATES, JOB_STATES, TASK_STATES } from '../state-store.js';
import { int, num, ref, str, type Schema } from './openapi-builders.js';

/**
 * The response shapes of the job routes, written by hand: the views that build them (views.ts) have no zod schema to
 * generate them from. Request bodies with a schema are generated instead (openapi-zod-components.ts).
 */
export const JOB_RESPONSE_COMPONENTS: Record<string, Schema> = {
  Error: {
    type: 'object',
    required: ['error'],
    properties: {
      error: { type: 'string', description: 'What went wrong, in one line' },
      details: { type: 'array', items: str, description: 'One line per problem, e.g. "tasks.0.demand: …"' },
    },
  },
  QueuePlace: {
    type: 'object',
    description: "The job's place in the queue layer (weighted fair queueing under the caps)",
    required: ['classId', 'status', 'position', 'reason', 'detail', 'sinceSeconds'],
    properties: {
      classId: { ...str, description: 'Its WFQ class (by size or team, from the controller config)' },
      status: {
        type: 'string',
        enum: ['admitted', 'waiting'],
        description: "admitted: in this round's plan or holding capacity; waiting: queued",
      },
      position: {
        ...int,
        nullable: true,
        minimum: 1,
        description: '1 = head of its class queue; null when admitted, or waiting outside the class order',
      },
      reason: {
        type: 'string',
        nullable: true,
        enum: ['class-share', 'caps', 'never-fits', null],
        description:
          'class-share: its class uses its weighted share of the capped capacity; caps: admitting it would break ' +
          "a cap ($/hour, instances, a family-group quota); never-fits: alone it breaks a cap or its class's maxShare",
      },
      detail: { ...str, description: 'One line naming the share or the caps, and the jobs ahead' },
      sinceSeconds: { ...num, description: 'Since when this place and reason hold' },
    },
  },
  Eta: {
    type: 'object',
    description:
      'A completion-time prediction (PCS §4): the cluster run forward in virtual time with the same admission and ' +
      'scheduler, learned throughputs (interference included), launch and restore delays, and no future arrivals',
    required: ['startSeconds', 'completionSeconds', 'computedAtSeconds', 'basis'],
    properties: {
      startSeconds: { ...num, nullable: true, description: 'Predicted start (epoch seconds)' },
      completionSeconds: {
        ...num,
        nullable: true,
        description: 'Predicted completion (epoch seconds); null when it cannot be predicted (see basis)',
      },
      completesAfterSeconds: {
        ...num,
        description:
          'Present when the prediction stopped short of the completion (its horizon or its time budget): the job ' +
          'completes after this time, if at all ("beyond N days")',
      },
      computedAtSeconds: num,
      basis: {
        ...str,
        description:
          'How it was obtained, e.g. "simulated 14 round(s) ahead with eva (learned co-location throughputs); no future arrivals; 3 job(s) ahead in class small"',
      },
    },
  },
  PredictionError: {
    type: 'object',
    description: 'How far the submission prediction was off, once the job succeeded',
    required: ['predictedCompletionSeconds', 'actualCompletionSeconds', 'errorSeconds', 'errorPercent'],
    properties: {
      predictedCompletionSeconds: num,
      actualCompletionSeconds: num,
      errorSeconds: { ...num, description: 'actual − predicted (positive: later than predicted)' },
      errorPercent: {
        ...num,
        nullable: true,
        description: 'PCS: 100 · |JCT − predicted JCT| / predicted JCT, JCTs from submission',
      },
    },
  },
  JobSummary: {
    type: 'object',
    required: [
      'id',
      'name',
      'team',
      'state',
      'submittedAtSeconds',
      'updatedAtSeconds',
      'migrations',
      'attempts',
      'maxAttempts',
      'progress',
      'taskCount',
      'queue',
      'eta',
      'etaPending',
      'warnings',
    ],
    properties: {
      id: str,
      name: str,
      team: str,
      state: { type: 'string', enum: [...JOB_STATES] },
      reason: str,
      submittedAtSeconds: num,
      startedAtSeconds: num,
      finishedAtSeconds: num,
      updatedAtSeconds: num,
      migrations: int,
      attempts: { ...int, description: 'The attempt running, or the last one made (from 1; retryStrategy)' },
      maxAttempts: {
        ...int,
        description: "Attempts the job may make in all (its retryStrategy's attempts, else 1)",
      },
      progress: {
        type: 'object',
        required: ['completed', 'total'],
        properties: { completed: num, total: { ...num, nullable: true } },
      },
      taskCount: int,
      queue: {
        allOf: [ref('QueuePlace')],
        nullable: true,
        description: 'Null once the job ended, or before its first round',
      },
      eta: {
        allOf: [ref('Eta')],
        nullable: true,
        description: 'The latest prediction; null before the first',
      },
      etaPending: {
        type: 'boolean',
        description:
          'True while the first prediction is computed: predictions run apart from submissions (a worker thread)',
      },
      warnings: {
        type: 'array',
        items: str,
        description:
          'How the job runs here that the submitter may not expect, e.g. an image the process executor ignores',
      },
      waitingFor: {
        type: 'array',
        items: str,
        description:
          'A queued job held for its dependencies: those that have not succeeded yet (absent when it waits for none)',
      },
      array: {
        type: 'object',
        required: ['index', 'size'],
        properties: { index: int, size: int },
        description: "One job of an array (spec.arrayProperties): its index and the array's size",
      },
      arrayWaitingFor: {
        type: 'array',
        items: { type: 'array', items: str },
        description:
          "Only in the answer to an array's submission, when one of its jobs waits: the dependencies each has not seen succeed, in index order",
      },
      arrayJobIds: {
        type: 'array',
        items: str,
        description:
          "Only in the answer to an array's submission: every job it made, in index order (the summary is the first's)",
      },
      replayed: {
        type: 'boolean',
        description:
          'Only in the answer to a submission sent again with its Idempotency-Key: true, the job(s) are those the first made',
      },
    },
  },
  DryRun: {
    type: 'object',
    description: 'What a job would get if submitted now (POST /v1/jobs?dryRun=true); nothing is stored',
    required: ['dryRun', 'name', 'team', 'tasks', 'costPerHour', 'eta', 'warnings'],
    properties: {
      dryRun: { type: 'boolean', enum: [true] },
      name: str,
      team: str,
      tasks: {
        type: 'array',
        items: {
          type: 'object',
          required: ['name', 'replicas', 'demand', 'instanceType', 'costPerHour'],
          properties: {
            name: str,
            replicas: int,
            demand: { type: 'object', description: 'Per family [gpus, vcpus, memoryGiB], as in the spec' },
            instanceType: {
              ...str,
              description: 'Cheapest type that hosts one replica alone (reservation price)',
            },
            costPerHour: { ...num, description: "That type's $/hour" },
          },
        },
      },
      costPerHour: { ...num, description: 'Sum of the reservation prices over all replicas, before packing' },
      spot: {
        type: 'object',
        description:
          'Where the controller buys spot and the job may use it: the job alone at its hosts’ cheapest spot prices',
        required: ['costPerHour', 'tasks'],
        properties: {
          costPerHour: {
            ...num,
            description: 'Sum over replicas (on demand where a host has no cheaper pool)',
          },
          tasks: {
            type: 'array',
            items: {
              type: 'object',
              required: ['name', 'instanceType', 'zone', 'costPerHour'],
              properties: { name: str, instanceType: str, zone: str, costPerHour: num },
            },
          },
        },
      },
      eta: {
        allOf: [ref('Eta')],
        nullable: true,
        description:
          'What the controller predicts if the job were submitted now (held for its dependencies, it starts once they are predicted to have succeeded); null when it cannot predict one',
      },
      warnings: {
        type: 'array',
        items: str,
        description:
          "What its submission would be warned about, as the job's warnings (e.g. an image the process executor ignores)",
      },
      waitingFor: {
        type: 'array',
        items: str,
        description: 'The dependencies (spec.dependsOn) it would be held for: those that have not succeeded',
      },
      startsNoEarlierThanSeconds: {
        ...num,
        nullable: true,
        description:
          'Held for its dependencies: the earliest it could start (epoch seconds), the latest predicted completion among them; null when one has no prediction',
      },
      arraySize: {
        ...int,
        description:
          'An array: the jobs it would submit, alike but for their index (the ETA is of one submitted alone)',
      },
    },
  },
  JobList: {
    type: 'object',
    required: ['jobs'],
    properties: {
      jobs: {
        type: 'array',
        items: {
          allOf: [
            ref('JobSummary'),
            {
              type: 'object',
              properties: {
                cost: {
                  type: 'number',
                  nullable: true,
                  description:
                    'With withCost=true: dollars the job has cost so far (null when the controller cannot account costs)',
                },
              },
            },
          ],
        },
      },
      next: {
        type: 'string',
        description:
          'With limit, when more jobs follow: the last job listed, to pass as `after` for the next page',
      },
      endedEarlier: {
        type: 'integer',
        description: 'With endedSince: how many jobs the other filters select ended before it (not listed)',
      },
    },
  },
  Task: {
    type: 'object',
    required: ['id', 'jobId', 'index', 'name', 'workloadKey', 'state', 'updatedAtSeconds'],
    properties: {
      id: str,
      jobId: str,
      index: int,
      name: str,
      workloadKey: str,
      state: { type: 'string', enum: [...TASK_STATES] },
      instanceId: str,
      lastCheckpointKey: str,
      lastCheckpointAtSeconds: num,
      updatedAtSeconds: num,
    },
  },
  TeamToken: {
    type: 'object',
    required: ['id', 'team', 'createdAtSeconds'],
    properties: {
      id: { type: 'string', description: 'The first 12 hex digits of the sha256 of the token' },
      team: str,
      label: str,
      createdAtSeconds: num,
      revokedAtSeconds: num,
    },
  },
  Instance: {
    type: 'object',
    required: ['id', 'typeName', 'state', 'requestedAtSeconds', 'updatedAtSeconds'],
    properties: {
      id: str,
      cloudId: str,
      typeName: str,
      state: { type: 'string', enum: [...INSTANCE_STATES] },
      availabilityZone: str,
      placementGroup: {
        ...str,
        description: 'The cluster placement group it is in (asked for, until launched)',
      },
      requestedAtSeconds: num,
      launchedAtSeconds: num,
      runningAtSeconds: num,
      terminatedAtSeconds: num,
      updatedAtSeconds: num,
      reason: str,
    },
  },
  JobDocument: {
    allOf: [
      ref('JobSummary'),
      {
        type: 'object',
        required: [
          'spec',
          'instances',
          'tasks',
          'etaSeconds',
          'submissionEta',
          'predictionError',
          'attemptFailures',
          'restarts',
          'dependencies',
          'startsNoEarlierThanSeconds',
        ],
        properties: {
          attemptFailures: {
            type: 'array',
            description:
              "How each retried attempt failed, oldest first (the last attempt's failure is the job's reason)",
            items: {
              type: 'object',
              required: ['attempt', 'taskId', 'reason', 'atSeconds'],
              properties: {
                attempt: int,
                taskId: str,
                exitCode: int,
                reason: {
                  ...str,
                  description: 'The exit code and the last lines of output, or why it could not run',
                },
                atSeconds: num,
              },
            },
          },
          restarts: {
            type: 'array',
            description:
              'Runs its instance or worker ended (lost, or stopped with the controller), oldest first: the job started again, from its last checkpoint',
            items: {
              type: 'object',
              required: ['atSeconds', 'cause'],
              properties: {
                atSeconds: num,
                cause: { ...str, description: 'e.g. "inst-4 was lost: worker stopped heartbeating"' },
              },
            },
          },
          spec: {
            type: 'object',
            description:
              'The spec as the job was accepted (validated, defaults filled in), in the form a submission takes: submitted again, it makes the same job',
          },
          instances: {
            type: 'array',
            items: {
              type: 'object',
              required: ['id', 'typeName', 'state', 'taskIds'],
              properties: {
                id: str,
                cloudId: str,
                typeName: str,
                state: { type: 'string', enum: [...INSTANCE_STATES] },
                availabilityZone: str,
                taskIds: { type: 'array', items: str },
              },
            },
          },
          tasks: { type: 'array', items: ref('Task') },
          etaSeconds: {
            ...num,
            nullable: true,
            description:
              'Seconds from the latest prediction (eta.computedAtSeconds) to its predicted completion (null: none)',
          },
          submissionEta: {
            allOf: [ref('Eta')],
            nullable: true,
            description:
              'The prediction made at submission, never overwritten (its error is measured at the end)',
          },
          predictionError: { allOf: [ref('PredictionError')], nullable: true },
          coStart: {
            type: 'object',
            nullable: true,
            description:
              "A multi-task job's start (null: one task, or neither held nor started): its tasks are prepared, held and released together (the controller's coStart switch). startSkewSeconds and barrierIdleCost are of one start, numbered by start; starts and totalBarrierIdleCost are of all of them",
            required: ['readyTaskIds', 'starts', 'totalBarrierIdleCost'],
            properties: {
              readyTaskIds: {
                type: 'array',
                items: str,
                description: 'Tasks prepared and held, waiting for the others (empty once released)',
              },
              releasedAtSeconds: { ...num, description: 'When all its tasks were released together' },
              startSkewSeconds: {
                ...num,
                description:
                  "Of the start numbered start: latest − earliest of its tasks' starts, as heard from the workers",
              },
              barrierIdleCost: {
                ...num,
                description:
                  "Of the start numbered start: paid capacity its started tasks held waiting for their siblings, $ (Σ (job start − task start) × the task's share of its instance's $/h), with the holds of this attempt that ended without a release before it; without a start, those holds alone",
              },
              start: {
                type: 'integer',
                description:
                  "Which of the job's starts (1: its first, over all its attempts) startSkewSeconds and barrierIdleCost are of; absent before its first in this attempt",
              },
              starts: { type: 'integer', description: "The job's measured starts, over all its attempts" },
              totalBarrierIdleCost: {
                ...num,
                description:
                  'Barrier-idle cost of all its starts and of every hold that ended without one, $: what fleetwise_barrier_idle_cost_dollars_total counted for the job',
              },
            },
          },
          dependencies: {
            type: 'array',
            description:
              'The jobs it depends on (spec.dependsOn) with their states: it stays queued, without a prediction, until every one has succeeded',
            items: {
              type: 'object',
              required: ['id', 'state'],
              properties: {
                id: str,
                state: { type: 'string', enum: [...JOB_STATES], nullable: true },
                predictedCompletionSeconds: {
                  ...num,
                  description:
                    'While it has not succeeded: its latest predicted completion (epoch seconds), if any',
                },
              },
            },
          },
          startsNoEarlierThanSeconds: {
            ...num,
            nullable: true,
            description:
              'While it is held for its dependencies: the earliest it can start (epoch seconds), the latest predicted completion among them; null when it waits for none or one has no prediction',
          },
        },
      },
    ],
  },
};
