import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import type { CloudProvider } from '../../src/cloud/provider.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { SystemClock } from '../../src/controller/clock.js';
import { Controller } from '../../src/controller/controller.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { openObjectStore } from '../../src/storage/open-object-store.js';
import { createS3Client } from '../../src/storage/s3-store.js';
import { describeWithMoto } from '../helpers/moto.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { until } from '../helpers/local-controller.js';
import { BASE_SETTINGS, catalog, CPU_SMALL, FakeCloud, jobSpec } from './controller-fixtures.js';

/**
 * The controller's loop when a dependency hangs (moto_server behind the outage proxy): a hung object store never
 * stalls planning (cost reports are written beside the loop), and a pass that does hang (a cloud call without an
 * answer) makes `/healthz` answer 503 naming it, until the pass ends.
 */
const ADMIN = 'loop-stall-admin-token-0123456789';
const BUCKET = 'fleetwise-loop-stall';

describeWithMoto(
  'controller loop with a hung dependency',
  (moto) => {
    let proxy: TcpProxy;
    const servers: ApiServer[] = [];
    const controllers: Controller[] = [];

    beforeAll(async () => {
      proxy = await startTcpProxy(moto.endpoint);
      await createS3Client(moto.clientOptions).send(new CreateBucketCommand({ Bucket: BUCKET }));
    });
    afterAll(async () => {
      await proxy.setMode('pass'); // cuts hung connections, so passes and report writes can end
      for (const c of controllers) await c.stop();
      for (const s of servers) await s.close();
      await proxy.close();
    });

    async function start(
      provider: CloudProvider,
      objectStore: ObjectStore | undefined,
      settings: { reportEverySeconds?: number } = {},
    ): Promise<{ controller: Controller; store: MemoryStateStore; health: () => Promise<Response> }> {
      const clock = new SystemClock();
      const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
      const controller = new Controller({
        store,
        catalog,
        provider,
        clock,
        objectStore,
        settings: {
          ...BASE_SETTINGS,
          clusterName: `stall-${controllers.length}`,
          roundSeconds: 0.1,
          pollSeconds: 0.05,
          minRoundGapSeconds: 0,
          loopStuckSeconds: 0.5,
          ...settings,
        },
      });
      controllers.push(controller);
      await controller.start();
      const api = await startApiServer(controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
      servers.push(api);
      return { controller, store, health: () => fetch(`${api.url}/healthz`) };
    }

    it('keeps running rounds while a cost report hangs in the object store', async () => {
      // Timeouts far longer than the test: the hung write stays hung, as it would without any.
      const objects = await openObjectStore(`s3://${BUCKET}/stall`, {
        ...moto.clientOptions,
        endpoint: proxy.url,
        timeouts: { connectTimeoutMs: 120_000, requestTimeoutMs: 120_000, idleTimeoutMs: 120_000 },
      });
      await proxy.setMode('hang');
      // A report is due at every pass; the first one's write hangs.
      const { controller, store, health } = await start(new FakeCloud(), objects, {
        reportEverySeconds: 0.05,
      });
      controller.submit(jobSpec('steady', CPU_SMALL), 'research'); // rounds with nothing to plan are not recorded
      await proxy.waitForHanging(1);
      const before = store.latestRound()?.round ?? 0;
      await until('five more rounds while the report hangs', () =>
        (store.latestRound()?.round ?? 0) >= before + 5 ? true : undefined,
      );
      expect(proxy.hanging()).toBeGreaterThanOrEqual(1);
      const answer = await health();
      expect(answer.status).toBe(200);
      expect(((await answer.json()) as { status: string }).status).toBe('ok');
      await proxy.setMode('pass');
    });

    it('/healthz answers 503 naming the pass while a cloud call hangs, and ok once it ends', async () => {
      await proxy.setMode('pass');
      const provider = new Ec2Provider(
        {
          region: 'us-east-1',
          amiId: 'ami-12c6146b',
          placements: [{ availabilityZone: 'us-east-1a' }],
          throttling: { maxAttempts: 1, baseDelayMs: 1, maxDelayMs: 1 },
        },
        { api: ec2ApiFromClient(createEc2Client({ ...moto.clientOptions, endpoint: proxy.url })) },
      );
      const { health } = await start(provider, undefined);
      expect((await health()).status).toBe(200);

      await proxy.setMode('hang'); // the next DescribeInstances never gets an answer
      await proxy.waitForHanging(1);
      // (Passes failing before the hang may first have it reported failing.)
      const stuck = await until('/healthz to report the stuck loop', async () => {
        const answer = await health();
        if (answer.status !== 503) return undefined;
        const body = (await answer.json()) as Record<string, unknown>;
        return body.status === 'stuck' ? body : undefined;
      });
      expect(stuck.status).toBe('stuck');
      expect(stuck.error).toMatch(
        /^the control loop has been in one (round|reconcile) pass for \d+ s \(more than 0\.5 s\)/,
      );
      expect(stuck.loop).toMatchObject({ pass: expect.stringMatching(/^(round|reconcile)$/) as unknown });

      await proxy.setMode('pass'); // the hung call fails, the pass ends, the loop goes on
      const healthy = await until('/healthz to be ok again', async () => {
        const answer = await health();
        return answer.status === 200 ? ((await answer.json()) as Record<string, unknown>) : undefined;
      });
      expect(healthy.status).toBe('ok');
      expect(healthy.loop).toMatchObject({ lastPassEndedAt: expect.any(String) as unknown });
    });
  },
  { resetBeforeEach: false },
);
