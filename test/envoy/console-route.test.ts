/**
 * The console's route in the rendered bundle (src/envoy/render-routes.ts): `/console` and everything
 * under it goes to modelgate's HTTP listener with ext_authz off (the console authenticates its own
 * API calls), placed before every route that could answer one of its paths.
 */
import { expect, test } from 'vitest';
import { renderRoutes } from '../../src/envoy/render-routes';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

test("routes /console to modelgate_http with none of modelgate's filters on (each is off by default: ext_authz, the mark, the meter)", () => {
  const routes = renderRoutes({
    altPrefix: '/alt',
    publicBaseUrl: null,
    perRoute: { upstream: { 'envoy.filters.http.example': {} }, models: {}, direct: {} },
  }) as Obj[];
  const i = routes.findIndex((r) => r.name === 'console');
  expect(i).toBeGreaterThan(-1);
  const r = routes[i];
  expect(r.match).toEqual({ path_separated_prefix: '/console' });
  expect(r.route.cluster).toBe('modelgate_http');
  expect(r.typed_per_filter_config).toBeUndefined();
  // Before every direct answer (the 404/405 routes and the catch-all), which would shadow it.
  const firstDirect = routes.findIndex((x) => x.direct_response !== undefined);
  expect(i).toBeLessThan(firstDirect);
  expect(routes.at(-1)!.name).toBe('unknown');
});
