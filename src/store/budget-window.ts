/**
 * Budget windows: the calendar day, ISO week (Monday to Monday) or calendar month that holds an
 * instant, in an IANA time zone, as epoch milliseconds [start, resetsAt). Wall-clock arithmetic is
 * done on civil dates (days since 1970-01-01, months of 28 to 31 days from the Gregorian calendar);
 * only the conversion between a civil date and an instant asks the zone, through Intl, so a day
 * across a daylight saving change lasts 23 or 25 hours and a zone whose clocks skip midnight starts
 * its day at the first instant that carries the date. Pure: the instant is a parameter.
 */

export const BUDGET_PERIODS = ['day', 'week', 'month'] as const;
export type BudgetPeriod = (typeof BUDGET_PERIODS)[number];

/** A budget of a key or a group (meter/budgets.ts): an amount per window. */
export interface Budget {
  /** In the balance's unit, > 0. */
  readonly amount: number;
  readonly period: BudgetPeriod;
  /** IANA zone name (validated with isTimeZone). */
  readonly timeZone: string;
}

/** True when `v` is a usable Budget: an amount > 0 and finite, a known period, a zone Intl knows. */
export function isBudget(v: unknown): v is Budget {
  if (typeof v !== 'object' || v === null) return false;
  const b = v as Record<string, unknown>;
  return (
    typeof b.amount === 'number' &&
    Number.isFinite(b.amount) &&
    b.amount > 0 &&
    (BUDGET_PERIODS as readonly unknown[]).includes(b.period) &&
    typeof b.timeZone === 'string' &&
    isTimeZone(b.timeZone)
  );
}

/** A window of a budget: `start` inclusive, `resetsAt` exclusive, epoch milliseconds. */
export interface BudgetWindow {
  readonly start: number;
  readonly resetsAt: number;
}

const DAY_MS = 86_400_000;
/** More than any zone's offset from UTC (−12:00 to +14:00), so a local date's start lies within. */
const SEARCH_MARGIN_MS = 30 * 3_600_000;
/** One formatter per zone; the zones are those of the configured budgets, bounded by the IANA list. */
const FORMATTERS = new Map<string, Intl.DateTimeFormat>();
const MAX_FORMATTERS = 1024;

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = FORMATTERS.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      era: 'short',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    if (FORMATTERS.size >= MAX_FORMATTERS) FORMATTERS.clear();
    FORMATTERS.set(timeZone, f);
  }
  return f;
}

/** True when `timeZone` is an IANA zone name this runtime knows (Intl rejects the others). */
export function isTimeZone(timeZone: string): boolean {
  if (typeof timeZone !== 'string' || timeZone.length === 0 || timeZone.length > 64) return false;
  try {
    formatter(timeZone);
    return true;
  } catch {
    // Intl's RangeError: not an IANA time zone
    return false;
  }
}

interface LocalTime {
  readonly year: number;
  /** 1..12 */
  readonly month: number;
  readonly day: number;
  /** Days since 1970-01-01 of the local date. */
  readonly dayNumber: number;
  /** Milliseconds since the local midnight as the wall clock reads them. */
  readonly msOfDay: number;
}

function localTime(t: number, timeZone: string): LocalTime {
  const parts = formatter(timeZone).formatToParts(new Date(t));
  let year = 0;
  let month = 0;
  let day = 0;
  let hour = 0;
  let minute = 0;
  let second = 0;
  let bc = false;
  for (const p of parts) {
    if (p.type === 'year') year = Number(p.value);
    else if (p.type === 'month') month = Number(p.value);
    else if (p.type === 'day') day = Number(p.value);
    else if (p.type === 'hour') hour = Number(p.value);
    else if (p.type === 'minute') minute = Number(p.value);
    else if (p.type === 'second') second = Number(p.value);
    else if (p.type === 'era') bc = p.value === 'BC' || p.value === 'B';
  }
  if (bc) year = 1 - year;
  const ms = ((t % 1000) + 1000) % 1000;
  return {
    year,
    month,
    day,
    dayNumber: civilDay(year, month, day),
    msOfDay: ((hour * 60 + minute) * 60 + second) * 1000 + ms,
  };
}

/** Days since 1970-01-01 of a Gregorian date; month 1..12, and days or months past the end roll over. */
function civilDay(year: number, month: number, day: number): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  return Math.floor(d.getTime() / DAY_MS);
}

/**
 * The first instant whose local date in `timeZone` is the civil day `dayNumber` or later. Usually
 * the local midnight, found from the zone's offset in two steps; when midnight does not exist on
 * that date (clocks skipping from 23:59 to 01:00) a binary search finds the first instant of the day.
 */
function startOfDay(dayNumber: number, timeZone: string): number {
  const wall = dayNumber * DAY_MS;
  let guess = wall;
  for (let i = 0; i < 2; i++) {
    const lt = localTime(guess, timeZone);
    const offset = lt.dayNumber * DAY_MS + lt.msOfDay - guess;
    guess = wall - offset;
  }
  const at = localTime(guess, timeZone);
  if (at.dayNumber === dayNumber && at.msOfDay === 0 && localTime(guess - 1, timeZone).dayNumber < dayNumber)
    return guess;
  let lo = wall - SEARCH_MARGIN_MS; // local date before dayNumber
  let hi = wall + SEARCH_MARGIN_MS; // local date dayNumber or later
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    if (localTime(mid, timeZone).dayNumber >= dayNumber) hi = mid;
    else lo = mid;
  }
  return hi;
}

/**
 * The window of a `period` budget in `timeZone` that holds the instant `now` (epoch ms): the local
 * day, the ISO week starting on Monday, or the calendar month. Throws a RangeError for a zone Intl
 * does not know (validate with isTimeZone first).
 */
export function budgetWindow(period: BudgetPeriod, timeZone: string, now: number): BudgetWindow {
  const lt = localTime(now, timeZone);
  let first: number;
  let next: number;
  if (period === 'day') {
    first = lt.dayNumber;
    next = lt.dayNumber + 1;
  } else if (period === 'week') {
    // 1970-01-01 was a Thursday: (dayNumber + 3) mod 7 counts days since Monday.
    first = lt.dayNumber - ((((lt.dayNumber + 3) % 7) + 7) % 7);
    next = first + 7;
  } else {
    first = civilDay(lt.year, lt.month, 1);
    next = civilDay(lt.year, lt.month + 1, 1);
  }
  return { start: startOfDay(first, timeZone), resetsAt: startOfDay(next, timeZone) };
}

/** The window after `w` (the one that starts when `w` resets). */
export function nextBudgetWindow(period: BudgetPeriod, timeZone: string, w: BudgetWindow): BudgetWindow {
  return budgetWindow(period, timeZone, w.resetsAt);
}
