/**
 * deploy/grafana/modelgate-dashboard.json, the dashboard operators import: every query parses
 * (promtool check rules on a rule file of its queries, Grafana's $__rate_interval as 5m), every
 * panel reads the Prometheus data source chosen on import, and the sections the runbooks point to
 * are there. Its metric names against a live scrape: metric-names.test.ts.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { stringify } from 'yaml';
import { describePromtool, promtool } from '../support/promtool';

interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  targets?: Array<{ expr: string; refId: string }>;
  gridPos: { h: number; w: number; x: number; y: number };
}
const dashboard = JSON.parse(
  readFileSync(join(__dirname, '..', '..', 'deploy', 'grafana', 'modelgate-dashboard.json'), 'utf8'),
) as { uid: string; panels: Panel[]; templating: { list: Array<{ name: string; type: string; query: string }> } };
const queryPanels = dashboard.panels.filter((p) => p.type !== 'row');

/** A query as Prometheus receives it from Grafana (its interval variables filled in). */
const asSent = (expr: string) =>
  expr.replaceAll('$__rate_interval', '5m').replaceAll('$__interval', '1m').replaceAll('$__range', '1h');

describePromtool("the dashboard's queries (promtool)", () => {
  it('parses every query', () => {
    const rules = queryPanels.flatMap((p, i) =>
      p.targets!.map((t) => ({ record: `dashboard:panel${i}:${t.refId}`, expr: asSent(t.expr) })),
    );
    const file = join(mkdtempSync(join(tmpdir(), 'modelgate-dashboard-')), 'queries.yaml');
    writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules }] }));
    const r = promtool(['check', 'rules', file]);
    expect(r.out).toContain(`SUCCESS: ${rules.length} rules found`);
    expect(r.status).toBe(0);
  });
});

it('asks for a Prometheus data source on import and every panel reads it', () => {
  expect(dashboard.templating.list).toContainEqual(
    expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }),
  );
  for (const p of queryPanels) {
    expect(p.datasource, p.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
    expect(p.targets!.length, p.title).toBeGreaterThan(0);
  }
  expect(new Set(dashboard.panels.map((p) => p.id)).size).toBe(dashboard.panels.length);
});

it('has the sections docs/operations.md describes', () => {
  const rows = dashboard.panels.filter((p) => p.type === 'row').map((p) => p.title);
  expect(rows).toEqual([
    'Decisions',
    "Envoy's view of modelgate",
    'Spend and tokens',
    'Rate limits',
    'Meter health',
    'Store',
  ]);
  const doc = readFileSync(join(__dirname, '..', '..', 'docs', 'operations.md'), 'utf8');
  for (const row of rows) expect(doc).toContain(`**${row}**`);
});

it("keeps panels on Grafana's 24-column grid without overlaps", () => {
  const cells = new Set<string>();
  for (const p of dashboard.panels) {
    expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
    for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x++) {
      for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y++) {
        expect(cells.has(`${x},${y}`), `${p.title} overlaps at ${x},${y}`).toBe(false);
        cells.add(`${x},${y}`);
      }
    }
  }
});
