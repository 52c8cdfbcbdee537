import { MARKETS } from '../../core/market.js';
import { SPOT_PREFERENCES } from '../../core/spot.js';
import { JOB_STATES } from '../state-store.js';
import { int, num, ref, str, type Schema } from './openapi-builders.js';

/** An instance's last launch error (controller/launch-error-records.ts), in the cluster view. */
const LAUNCH_ERROR: Schema = {
  type: 'object',
  description:
    'Present while the instance waits for a launch that failed (requested): the last failure, kept until a launch ' +
    'succeeds, over controller restarts too. Capacity and quota refusals are not kept here: another type is launched',
  required: ['attempts', 'atSeconds', 'nextAttemptAtSeconds', 'permanent'],
  properties: {
    message: {
      ...str,
      description:
        "The cloud's error message; withheld from team tokens (it may name the account's resources)",
    },
    code: {
      ...str,
      description: "The cloud's error code, when it gave one (EC2's: InvalidGroup.NotFound, …)",
    },
    attempts: { ...int, description: 'Failed launches so far' },
    atSeconds: { ...num, description: 'When the last one failed' },
    nextAttemptAtSeconds: {
      ...num,
      description: 'When it is tried again (a controller started again tries at once)',
    },
    permanent: {
      type: 'boolean',
      description:
        'The cloud refused what the launch asks for (a security group, subnet, key pair or image that does not ' +
        'exist, a parameter, a permission such as iam:PassRole, an account blocked or not opted in): it fails until ' +
        'an operator fixes the cause, and is tried again only at the longest backoff (5 minutes)',
    },
  },
};

/** The response shapes of the cluster, leadership, explanation and cost routes, written by hand as the job ones are. */
export const CLUSTER_RESPONSE_COMPONENTS: Record<string, Schema> = {
  Leadership: {
    type: 'object',
    description:
      "This controller's place among the controllers sharing its state database (one lease, one active controller)",
    required: ['role', 'epoch', 'holder', 'activeUrl'],
    properties: {
      role: {
        type: 'string',
        enum: ['active', 'standby'],
        description:
          'active: runs the cluster; standby: waits for the lease (a controller on SQLite is active alone)',
      },
      epoch: {
        ...int,
        nullable: true,
        description:
          "The lease's fencing token: one more at every takeover (null on SQLite, which has no lease)",
      },
      holder: { ...str, nullable: true, description: 'The controller holding the lease' },
      activeUrl: { ...str, nullable: true, description: "The active controller's API, as it announced it" },
    },
  },
  Cluster: {
    type: 'object',
    required: ['scope', 'instances', 'tasks', 'costPerHour', 'controller'],
    properties: {
      controller: ref('Leadership'),
      scope: {
        type: 'string',
        enum: ['all', 'team'],
        description: "team: only the caller's tasks are listed",
      },
      costPerHour: { ...num, description: '$/hour of the instances held now' },
      instances: {
        type: 'array',
        items: {
          allOf: [
            ref('Instance'),
            {
              type: 'object',
              required: ['costPerHour', 'taskIds', 'market'],
              properties: {
                costPerHour: { ...num, description: '$/hour as billed: on spot, its pool spot price' },
                taskIds: { type: 'array', items: str },
                market: {
                  type: 'string',
                  enum: [...MARKETS],
                  description: 'How it was bought: spot unless its launch got on-demand capacity',
                },
                launchError: LAUNCH_ERROR,
              },
            },
          ],
        },
      },
      tasks: { type: 'array', items: ref('Task') },
      orphans: {
        type: 'array',
        description:
          'Instances tagged with the cluster that the state does not know, kept running under the orphan policy ' +
          '`keep`: their tasks are not accounted for, so nothing touches them; the operator decides',
        items: {
          type: 'object',
          required: ['cloudId', 'typeName', 'state', 'policy', 'firstSeenAtSeconds'],
          properties: {
            cloudId: str,
            typeName: str,
            state: str,
            availabilityZone: str,
            launchedAtSeconds: num,
            firstSeenAtSeconds: num,
            policy: { type: 'string', enum: ['keep'] },
          },
        },
      },
    },
  },
  ClusterLatency: {
    type: 'object',
    required: ['scope', 'pairs', 'probes'],
    properties: {
      scope: {
        type: 'string',
        enum: ['all', 'team'],
        description: "team: the probes' addresses are withheld",
      },
      pairs: {
        type: 'array',
        items: {
          type: 'object',
          required: ['fromInstanceId', 'toInstanceId', 'samples', 'failures', 'windowSeconds', 'atSeconds'],
          properties: {
            fromInstanceId: str,
            toInstanceId: str,
            maxMicroseconds: {
              ...num,
              description:
                'Largest round trip in the window (what placement uses); a probe that timed out counts at the ' +
                'timeout; absent when every probe was refused',
            },
            p99Microseconds: num,
            samples: { ...int, description: 'Figures in the window: answers and timed-out probes' },
            failures: { ...int, description: 'Probes that got no answer in the window' },
            windowSeconds: num,
            atSeconds: { ...num, description: 'When the report arrived (controller clock)' },
          },
        },
      },
      probes: {
        type: 'array',
        items: {
          type: 'object',
          required: ['instanceId', 'host', 'port', 'atSeconds'],
          properties: { instanceId: str, host: str, port: int, atSeconds: num },
        },
      },
    },
  },
  Why: {
    type: 'object',
    required: ['jobId', 'state', 'records', 'market'],
    properties: {
      jobId: str,
      state: { type: 'string', enum: [...JOB_STATES] },
      queue: {
        allOf: [ref('QueuePlace')],
        nullable: true,
        description:
          'Its place in the queue now; null once the job ended, or before its first round. It says why a job waits ' +
          'when no recorded round has (a job no cap admits, on an idle cluster, leaves nothing to plan)',
      },
      market: {
        type: 'object',
        description: "How the job's capacity is bought: its spot setting and the instances its tasks are on",
        required: ['spot', 'instances'],
        properties: {
          spot: { type: 'string', enum: [...SPOT_PREFERENCES] },
          spotMaxDelayMinutes: num,
          instances: {
            type: 'array',
            items: {
              type: 'object',
              required: ['id', 'typeName', 'market'],
              properties: {
                id: str,
                typeName: str,
                availabilityZone: str,
                market: { type: 'string', enum: [...MARKETS] },
                onDemandBecause: {
                  ...str,
                  description:
                    'For a job that may use spot on an on-demand instance: why, as far as the records say',
                },
              },
            },
          },
        },
      },
      records: {
        type: 'array',
        items: {
          type: 'object',
          required: ['round', 'atSeconds', 'summary', 'decision'],
          properties: {
            round: int,
            atSeconds: num,
            summary: str,
            decision: {
              type: 'object',
              description: "The round's decision record (candidates, chosen plan, reason, waiting, pinned)",
            },
          },
        },
      },
    },
  },
  Costs: {
    type: 'object',
    required: ['scope', 'generatedAtSeconds', 'sinceSeconds', 'totalCost', 'byJob', 'byTeam', 'byInstance'],
    properties: {
      scope: {
        type: 'string',
        enum: ['all', 'team'],
        description: "team: only the caller's jobs; instance lines and cluster overheads withheld",
      },
      generatedAtSeconds: num,
      sinceSeconds: num,
      totalCost: num,
      monthReport: {
        type: 'object',
        description:
          'For a whole UTC month that has ended: whether the figures are the report stored as the month ended ' +
          "(stored) or the history replayed now, at today's prices (recomputed), and where it is or why not",
        required: ['from', 'detail'],
        properties: { from: { type: 'string', enum: ['stored', 'recomputed'] }, detail: str },
      },
      byJob: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            id: str,
            cost: num,
            team: str,
            name: str,
            migrationCost: {
              ...num,
              description: 'The part of cost spent checkpointing and restoring moved tasks',
            },
          },
        },
      },
      byTeam: { type: 'array', items: { type: 'object', properties: { id: str, cost: num } } },
      byInstance: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            id: str,
            cost: num,
            typeName: str,
            idleCost: num,
            billedSeconds: { ...num, description: 'The instance time billed in the period' },
          },
        },
      },
      idleCost: { ...num, nullable: true },
      migrationOverheadCost: { ...num, nullable: true },
      costPerHourNow: {
        ...num,
        description: "The fleet's $/hour now (a closed period: at its end); admin answers only",
      },
    },
  },
};
