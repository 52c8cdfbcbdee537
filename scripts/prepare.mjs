#!/usr/bin/env node
// npm runs `prepare` after `npm install` and before `npm pack`/`publish`: it builds dist/. It also runs it when
// `npx fleetwise …` in the checkout links the checkout into npx's cache (npm_command "exec"): that would rebuild
// dist/ silently, for tens of seconds, under a controller and workers running from it, and an interrupted rebuild
// leaves empty files there. So an exec builds only when there is no build yet.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
if (process.env.npm_command === 'exec' && existsSync(join(root, 'dist', 'cli', 'main.js'))) process.exit(0);
const build = spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
process.exit(build.status ?? 1);
