/** One place for unit conversions: money is USD, time is seconds unless a name says otherwise. */
export const SECONDS_PER_HOUR = 3600;

export function perHourToPerSecond(dollarsPerHour: number): number {
  return dollarsPerHour / SECONDS_PER_HOUR;
}

export function secondsToHours(seconds: number): number {
  return seconds / SECONDS_PER_HOUR;
}

/** Round money to cents; used where the paper's decision rule rounds (Eva reference, generate_planned_config). */
export function roundCents(dollars: number): number {
  return Math.round(dollars * 100) / 100;
}
