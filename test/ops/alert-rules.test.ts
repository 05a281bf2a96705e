/**
 * deploy/prometheus/modelgate-rules.yaml, the alert rules docs/operations.md documents: promtool
 * (v0.316.0, scripts/ensure-promtool) checks them and runs their unit tests
 * (modelgate-rules.test.yaml: each alert fires on synthetic series and stays quiet on healthy ones).
 * That every metric they name is exported by a running gateway: metric-names.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { parse } from 'yaml';
import { describePromtool, promtool } from '../support/promtool';

const DIR = join(__dirname, '..', '..', 'deploy', 'prometheus');
const RULES = join(DIR, 'modelgate-rules.yaml');
const TESTS = join(DIR, 'modelgate-rules.test.yaml');

interface RuleFile {
  groups: Array<{ rules: Array<{ alert?: string; record?: string; annotations?: Record<string, string> }> }>;
}
const alerts = (parse(readFileSync(RULES, 'utf8')) as RuleFile).groups
  .flatMap((g) => g.rules)
  .filter((r) => r.alert !== undefined);

describePromtool('the alert rules (promtool)', () => {
  it('passes promtool check rules', () => {
    const r = promtool(['check', 'rules', RULES]);
    expect(r.out).toMatch(/SUCCESS: \d+ rules found/);
    expect(r.status).toBe(0);
  });

  it('passes its promtool unit tests', () => {
    const r = promtool(['test', 'rules', TESTS], DIR);
    expect(r.out).toContain('SUCCESS');
    expect(r.status).toBe(0);
  }, 120_000);

  it('has a unit test that fires each alert and one that keeps it quiet', () => {
    const tests = (
      parse(readFileSync(TESTS, 'utf8')) as {
        tests: Array<{ alert_rule_test: Array<{ alertname: string; exp_alerts: unknown[] }> }>;
      }
    ).tests;
    const cases = tests.flatMap((t) => t.alert_rule_test);
    for (const name of new Set(alerts.map((a) => a.alert!))) {
      expect(
        cases.some((c) => c.alertname === name && c.exp_alerts.length > 0),
        `${name} fires in a test`,
      ).toBe(true);
      expect(
        cases.some((c) => c.alertname === name && c.exp_alerts.length === 0),
        `${name} stays quiet in a test`,
      ).toBe(true);
    }
  });
});

it('gives every alert a runbook in docs/operations.md', () => {
  const doc = readFileSync(join(__dirname, '..', '..', 'docs', 'operations.md'), 'utf8');
  const headings = new Set([...doc.matchAll(/^#### (\w+)$/gm)].map((m) => m[1]));
  for (const a of alerts) {
    expect(headings.has(a.alert!), `a "#### ${a.alert}" runbook section`).toBe(true);
    expect(a.annotations?.runbook_url).toBe(`docs/operations.md#${a.alert!.toLowerCase()}`);
  }
});
