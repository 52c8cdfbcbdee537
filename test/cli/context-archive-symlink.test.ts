import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkDockerfile, MissingDockerfileError, packContext } from '../../src/cli/context-archive.js';

/** What every refusal of a Dockerfile link ends with. */
const ADVICE =
  '; a build sees only what is packed in the context (copy the file in, or build from a directory holding both)';

let repo = '';
let ctx = '';
beforeEach(() => {
  // A monorepo whose service directory is the build context and whose Dockerfiles live in a shared folder.
  repo = mkdtempSync(join(tmpdir(), 'fleetwise-ctx-link-'));
  mkdirSync(join(repo, 'docker'));
  writeFileSync(join(repo, 'docker', 'Dockerfile.api'), 'FROM busybox\nLABEL v=1\n');
  ctx = join(repo, 'services', 'api');
  mkdirSync(ctx, { recursive: true });
  writeFileSync(join(ctx, 'app.sh'), 'echo hi\n');
});
afterEach(() => rmSync(repo, { recursive: true, force: true }));

/** The error `checkDockerfile` (and so `packContext`) fails with, checked to be the same for both. */
async function refusal(dockerfile?: string): Promise<Error> {
  const checked = await checkDockerfile(ctx, dockerfile).then(
    () => new Error('accepted'),
    (e: unknown) => e as Error,
  );
  const packed = await packContext(ctx, undefined, dockerfile).then(
    () => new Error('accepted'),
    (e: unknown) => e as Error,
  );
  expect(packed.message).toBe(checked.message);
  expect(checked).toBeInstanceOf(MissingDockerfileError);
  return checked;
}

describe('a Dockerfile that is a symlink', () => {
  it('is refused when it leads outside the context, naming the Dockerfile and its target', async () => {
    symlinkSync('../../docker/Dockerfile.api', join(ctx, 'Dockerfile'));
    expect((await refusal()).message).toBe(
      `Dockerfile Dockerfile in build context ${ctx} is a symlink to ../../docker/Dockerfile.api, which leads ` +
        `outside the context${ADVICE}`,
    );
    mkdirSync(join(ctx, 'build'));
    symlinkSync(join(repo, 'docker', 'Dockerfile.api'), join(ctx, 'build', 'Dockerfile.prod'));
    expect((await refusal('./build/Dockerfile.prod')).message).toBe(
      `Dockerfile ./build/Dockerfile.prod in build context ${ctx} is a symlink to ` +
        `${join(repo, 'docker', 'Dockerfile.api')}, which leads outside the context${ADVICE}`,
    );
  });

  it('is refused when it leads out through another link, as the kernel follows them', async () => {
    // `here/..` reads as the context itself, but `here` is the context, so its `..` is the context's parent.
    symlinkSync('.', join(ctx, 'here'));
    writeFileSync(join(repo, 'services', 'Dockerfile'), 'FROM busybox\n');
    symlinkSync('here/../Dockerfile', join(ctx, 'Dockerfile'));
    expect((await refusal()).message).toMatch(
      /is a symlink to here\/\.\.\/Dockerfile, which leads outside the context;/,
    );
    rmSync(join(ctx, 'Dockerfile'));
    symlinkSync(repo, join(ctx, 'up'));
    symlinkSync('up/docker/Dockerfile.api', join(ctx, 'Dockerfile'));
    expect((await refusal()).message).toMatch(
      /is a symlink to up\/docker\/Dockerfile\.api, which leads outside the context \(through up\);/,
    );
  });

  it('is refused when it leads to nothing packed: dangling, a directory, a loop, or what .dockerignore leaves out', async () => {
    mkdirSync(join(ctx, 'docker'));
    writeFileSync(join(ctx, 'docker', 'Dockerfile.api'), 'FROM busybox\n');
    const cases: [string, string][] = [
      ['docker/Dockerfile.gone', 'which is not in the context (nothing at docker/Dockerfile.gone)'],
      ['docker', 'which is not a file (docker)'],
      ['Dockerfile', 'which does not resolve (a loop of links)'],
      ['app.sh/Dockerfile', 'which is not in the context (app.sh is not a directory)'],
    ];
    for (const [target, why] of cases) {
      rmSync(join(ctx, 'Dockerfile'), { force: true });
      symlinkSync(target, join(ctx, 'Dockerfile'));
      expect((await refusal()).message, target).toBe(
        `Dockerfile Dockerfile in build context ${ctx} is a symlink to ${target}, ${why}${ADVICE}`,
      );
    }
    rmSync(join(ctx, 'Dockerfile'));
    symlinkSync('docker/Dockerfile.api', join(ctx, 'Dockerfile'));
    await expect(checkDockerfile(ctx)).resolves.toBeUndefined();
    writeFileSync(join(ctx, '.dockerignore'), 'docker\n');
    expect((await refusal()).message).toMatch(
      /is a symlink to docker\/Dockerfile\.api, which \.dockerignore leaves out of the context \(docker\/Dockerfile\.api\);/,
    );
    // Re-included below the ignored directory: packed, so the link is good again.
    writeFileSync(join(ctx, '.dockerignore'), 'docker\n!docker/Dockerfile.api\n');
    await expect(checkDockerfile(ctx)).resolves.toBeUndefined();
  });

  it('is accepted when it leads to a file inside the context, also through a link inside it, and packed as a link', async () => {
    mkdirSync(join(ctx, 'docker'));
    writeFileSync(join(ctx, 'docker', 'Dockerfile.api'), 'FROM busybox\nLABEL v=2\n');
    symlinkSync('docker/Dockerfile.api', join(ctx, 'Dockerfile'));
    await expect(checkDockerfile(ctx)).resolves.toBeUndefined();
    symlinkSync('docker', join(ctx, 'files'));
    mkdirSync(join(ctx, 'ops'));
    symlinkSync('../files/./Dockerfile.api', join(ctx, 'ops', 'Dockerfile.prod'));
    await expect(checkDockerfile(ctx, 'ops/Dockerfile.prod')).resolves.toBeUndefined();
    const packed = await packContext(ctx, undefined, 'ops/Dockerfile.prod');
    // app.sh and docker/Dockerfile.api: the links are packed as links, not as the files they lead to.
    expect(packed.files).toBe(2);
  });

  it('is passed over for the lower-case dockerfile when the build names none, as docker does', async () => {
    symlinkSync('../../docker/Dockerfile.api', join(ctx, 'Dockerfile'));
    writeFileSync(join(ctx, 'dockerfile'), 'FROM busybox\n');
    await expect(checkDockerfile(ctx)).resolves.toBeUndefined();
    // Named, it is what the build reads: refused.
    expect((await refusal('Dockerfile')).message).toMatch(
      /^Dockerfile Dockerfile in build context .* leads outside/,
    );
  });
});

describe('a build context directory that is itself a symlink', () => {
  it('is packed as the directory it leads to, the links inside it still packed as links', async () => {
    writeFileSync(join(ctx, 'Dockerfile'), 'FROM busybox\n');
    symlinkSync('app.sh', join(ctx, 'start'));
    const absolute = join(repo, 'api-absolute');
    const relative = join(repo, 'api-relative');
    symlinkSync(ctx, absolute);
    symlinkSync(join('services', 'api'), relative);
    const direct = await packContext(ctx);
    for (const link of [absolute, relative]) {
      await expect(checkDockerfile(link), link).resolves.toBeUndefined();
      expect((await packContext(link)).archive.equals(direct.archive), link).toBe(true);
    }
    // A link to a file is no context.
    symlinkSync(join(ctx, 'app.sh'), join(repo, 'file-link'));
    await expect(packContext(join(repo, 'file-link'))).rejects.toThrow(
      `build context ${join(repo, 'file-link')} is not a directory`,
    );
  });
});
