import { createRequire } from 'node:module';
import { pino, type DestinationStream, type Logger } from 'pino';
import type pinoPretty from 'pino-pretty';
import { ValidationError } from '../core/validation.js';

/** pino-pretty, loaded only for a terminal: every controller and worker process would otherwise pay for it at start. */
function loadPretty(): typeof pinoPretty {
  return createRequire(import.meta.url)('pino-pretty') as typeof pinoPretty;
}

/**
 * How the controller writes its log: readable lines for a person at a terminal, JSON lines (pino's format, epoch
 * milliseconds) for anything that reads the stream: a file, a pipe, journald, a log shipper.
 */

export const LOG_FORMATS = ['auto', 'pretty', 'json'] as const;
export type LogFormatChoice = (typeof LOG_FORMATS)[number];
export type LogFormat = Exclude<LogFormatChoice, 'auto'>;

/** Overrides the choice when no --log-format is given (e.g. a service unit that wants JSON on a terminal). */
export const LOG_FORMAT_ENV = 'FLEETWISE_LOG_FORMAT';

/** The format for a stream: `auto` is pretty exactly when the stream is a terminal. */
export function selectLogFormat(
  choice: string | undefined,
  stream: { readonly isTTY?: boolean | undefined },
  env: NodeJS.ProcessEnv = process.env,
): LogFormat {
  const wanted = choice ?? env[LOG_FORMAT_ENV] ?? 'auto';
  if (!(LOG_FORMATS as readonly string[]).includes(wanted))
    throw new ValidationError(choice === undefined ? LOG_FORMAT_ENV : '--log-format', [
      `expected ${LOG_FORMATS.join(' | ')}, got ${wanted}`,
    ]);
  if (wanted === 'auto') return stream.isTTY === true ? 'pretty' : 'json';
  return wanted as LogFormat;
}

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** How much the controller and its local workers log (they inherit it); `info` unless set. */
export const LOG_LEVEL_ENV = 'FLEETWISE_LOG_LEVEL';

export function logLevelFrom(env: NodeJS.ProcessEnv = process.env): LogLevel {
  const wanted = env[LOG_LEVEL_ENV];
  if (wanted === undefined || wanted === '') return 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(wanted))
    throw new ValidationError(LOG_LEVEL_ENV, [`expected ${LOG_LEVELS.join(' | ')}, got ${wanted}`]);
  return wanted as LogLevel;
}

/** A pino logger for a command (`base` names it on every line) at FLEETWISE_LOG_LEVEL's level, writing to `destination`. */
export function commandLogger(
  base: Record<string, unknown>,
  destination: DestinationStream,
  env: NodeJS.ProcessEnv = process.env,
): Logger {
  return pino({ base, level: logLevelFrom(env) }, destination);
}

/**
 * A pino destination on file descriptor `fd` in `format`, written synchronously: the lines a process writes just
 * before it is killed outright (SIGKILL, the OOM killer) are the ones its operator needs, and a destination that held
 * them in memory while a write was in flight lost them.
 */
export function logDestination(format: LogFormat, fd: number): DestinationStream {
  if (format === 'json') return pino.destination({ fd, sync: true });
  return loadPretty()({
    destination: fd,
    sync: true,
    translateTime: 'SYS:HH:MM:ss.l',
    // The same on every line of one controller: noise for a reader at a terminal (JSON keeps them).
    ignore: 'pid,hostname,component',
    singleLine: true,
  });
}
