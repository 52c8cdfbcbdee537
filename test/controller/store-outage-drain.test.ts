import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { counterJobBody, type CounterJobView } from '../helpers/counter-spec.js';
import { createS3Client } from '../../src/storage/s3-store.js';
import {
  killLocalLeftovers,
  startLocalController,
  until,
  type StartedController,
} from '../helpers/local-controller.js';
import { describeWithMoto, TEST_CREDENTIALS, TEST_REGION } from '../helpers/moto.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * A drain that meets an object-store outage, end to end: a local controller and its workers (the built CLI, process
 * executor) keep checkpoints and logs in S3 (moto_server behind the outage proxy). The store goes down while a job
 * runs, the job's instance is drained, and the move cannot upload the task's last checkpoint and log. The job stays
 * `migrating` while the store is down, and once it is back the move completes and the job finishes from its
 * checkpoint: no phase of the move is left undone.
 */
const BUCKET = 'fleetwise-outage-drain';
const COUNT_TO = 150;

describeWithMoto(
  'a drain during an object-store outage (local controller, S3 behind the outage proxy)',
  (moto) => {
    let proxy: TcpProxy;
    let scratch: string;
    let ctl: StartedController | undefined;

    beforeAll(async () => {
      scratch = mkdtempSync(join(tmpdir(), 'fw-outage-drain-'));
      proxy = await startTcpProxy(moto.endpoint);
      await createS3Client(moto.clientOptions).send(new CreateBucketCommand({ Bucket: BUCKET }));
    });
    afterAll(async () => {
      await proxy.setMode('pass');
      if (ctl !== undefined) {
        ctl.process.kill('SIGTERM');
        await ctl.exited;
        killLocalLeftovers(ctl.stateDir);
      }
      await proxy.close();
      rmSync(scratch, { recursive: true, force: true });
    });

    /** Every worker's log, joined. */
    const workerLogs = (stateDir: string): string => {
      const dir = join(stateDir, 'instances');
      return existsSync(dir)
        ? readdirSync(dir)
            .map((i) => join(dir, i, 'worker.log'))
            .filter((f) => existsSync(f))
            .map((f) => readFileSync(f, 'utf8'))
            .join('\n')
        : '';
    };

    it('the move waits for the store and completes once it is back; the job succeeds from its checkpoint', async () => {
      const started = await startLocalController(join(scratch, 'state'), {
        config: [`objectStore: s3://${BUCKET}/cluster`],
        env: {
          AWS_ENDPOINT_URL_S3: proxy.url,
          AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
          AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
          AWS_REGION: TEST_REGION,
          AWS_MAX_ATTEMPTS: '2',
          AWS_EC2_METADATA_DISABLED: 'true',
        },
      });
      ctl = started;
      const submitted = await started.api(
        'POST',
        '/v1/jobs',
        counterJobBody({ countTo: COUNT_TO, checkpointSeconds: 1, checkpointTimeoutSeconds: 2 }),
      );
      expect(submitted.status, submitted.text).toBe(201);
      const id = (submitted.json as { id: string }).id;
      const job = async (): Promise<CounterJobView> =>
        (await started.api('GET', `/v1/jobs/${id}`)).json as CounterJobView;

      const running = await until(
        'the job to run and checkpoint',
        async () => {
          const doc = await job();
          return doc.state === 'running' && doc.progress.completed >= 30 ? doc : undefined;
        },
        40_000,
        started.diagnostics,
      );

      await proxy.setMode('refuse');
      const drained = await started.api('POST', `/v1/instances/${running.instances[0]?.id ?? ''}/drain`);
      expect(drained.status).toBe(200);
      // The source's task is signalled and stops (killed after its 2 s timeout: the checkpoint it would write on the
      // signal waits for the store to take the previous one); then the move's uploads meet the outage.
      const exited = (): boolean =>
        started
          .instances()
          .some((i) => ['exit', 'killed'].some((f) => existsSync(join(i.dir, 'executor', `${id}.0`, f))));
      await until(
        'the drained task to stop',
        () => (exited() ? true : undefined),
        40_000,
        started.diagnostics,
      );
      const seen = workerLogs(started.stateDir).length;
      await until(
        "the move's uploads to fail",
        () => (/ECONNREFUSED/.test(workerLogs(started.stateDir).slice(seen)) ? true : undefined),
        40_000,
        started.diagnostics,
      );
      expect((await job()).state).toBe('migrating'); // waiting for the store, not failed, not lost

      await proxy.setMode('pass');
      const done = await until(
        'the job to succeed once the store is back',
        async () => {
          const doc = await job();
          return doc.state === 'succeeded' ? doc : undefined;
        },
        60_000,
        started.diagnostics,
      );
      expect(done.migrations).toBeGreaterThanOrEqual(1);
      const logs = (await started.api('GET', `/v1/jobs/${id}/logs`)).text;
      expect(logs).toMatch(new RegExp(`finished ${COUNT_TO}`));
      // It resumed from the last checkpoint the task marked (its newer ones waited for the store), not from zero.
      expect(Number(/resumed at (\d+)/.exec(logs)?.[1])).toBeGreaterThan(0);
    }, 150_000);
  },
  { resetBeforeEach: false },
);
