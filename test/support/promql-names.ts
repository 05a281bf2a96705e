/**
 * The metric names a PromQL expression reads: every identifier that is not a function call, a
 * keyword, a label name (inside `{}`, `by ()`, `on ()`...), a duration, a number or a string. Used
 * to check the alert rules and the dashboard against a live scrape; promtool parses the same
 * expressions (a query this lexer misreads would fail there or here, never pass silently).
 */
const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'offset',
  'bool',
  'inf',
  'nan',
  'atan2',
  'start',
  'end',
]);

export function metricNames(expr: string): string[] {
  let s = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""'); // strings
  s = s.replace(/\{[^}]*\}/g, ' '); // label matchers
  s = s.replace(/\[[^\]]*\]/g, ' '); // ranges and subqueries
  s = s.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' '); // label lists
  const names = new Set<string>();
  for (const m of s.matchAll(/(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const [, name, call] = m;
    if (call || KEYWORDS.has(name.toLowerCase())) continue;
    names.add(name);
  }
  return [...names];
}

/** The sample names of a Prometheus text exposition (not the `# TYPE` lines: a series must be there). */
export function exportedNames(text: string): Set<string> {
  const out = new Set<string>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line);
    if (m) out.add(m[1]);
  }
  return out;
}
