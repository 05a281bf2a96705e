/**
 * How a report is settled (src/meter/policy/settle.ts): which reports cost nothing, which are
 * debited the provider's usage, which an estimate and why, and the bounds of an estimate. Tables
 * name each kind of answer; properties check the promises of docs/metering.md over random reports.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  boundEstimate,
  classifyReport,
  outputPlan,
  plausible,
  reportBounds,
  routeReport,
  type ClassifyFacts,
  type OutputFacts,
  type ReadUsage,
  type ReportEnd,
} from '../../../src/meter/policy/settle';
import type { Usage } from '../../../src/meter/usage-reader';

const CEILING = { inputTokens: 10_000_000, outputTokens: 1_000_000 };
const USAGE: Usage = { inputTokens: 120, outputTokens: 40, cachedInputTokens: 20 };
const read = (usage: Usage | undefined, undecodable = false): ReadUsage => ({ usage, undecodable });

describe('routeReport: what costs nothing', () => {
  const end = (status: number, ended: boolean, upstreamSent: boolean, upstreamAnswered: boolean): ReportEnd => ({
    status,
    ended,
    upstreamSent,
    upstreamAnswered,
  });
  it.each([
    ['a complete answer', end(200, true, true, true), { kind: 'settle', unanswered: false, readAnswer: true }],
    [
      'a stream cut after its headers',
      end(200, false, true, true),
      { kind: 'settle', unanswered: false, readAnswer: true },
    ],
    ["the provider's 429", end(429, true, true, true), { kind: 'release', reason: 'upstream_error' }],
    ["the provider's 500, cut", end(500, false, true, true), { kind: 'release', reason: 'upstream_error' }],
    [
      'nothing upstream, ended (a local reply)',
      end(0, true, false, false),
      { kind: 'release', reason: 'upstream_error' },
    ],
    [
      "Envoy's 504 after the request went upstream with no answer back",
      end(504, true, true, false),
      { kind: 'settle', unanswered: true, readAnswer: false },
    ],
    [
      'the client gone before any answer came back',
      end(0, false, true, false),
      { kind: 'settle', unanswered: true, readAnswer: false },
    ],
    [
      'no status and not ended, nothing upstream',
      end(0, false, false, false),
      { kind: 'settle', unanswered: false, readAnswer: false },
    ],
  ] as const)('%s', (_name, r, want) => {
    expect(routeReport(true, r)).toEqual(want);
  });

  it('releases everything when the meter is switched off', () => {
    expect(routeReport(false, end(200, true, true, true))).toEqual({ kind: 'release', reason: 'meter_disabled' });
  });

  it('never releases a request that went upstream and got no answer back, whatever its status', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 599 }), fc.boolean(), (status, ended) => {
        expect(routeReport(true, end(status, ended, true, false))).toMatchObject({
          kind: 'settle',
          unanswered: true,
          readAnswer: false,
        });
      }),
    );
  });
});

describe('classifyReport: exact or estimated, and why', () => {
  const facts = (over: Partial<ClassifyFacts> = {}): ClassifyFacts => ({
    status: 200,
    ended: true,
    unanswered: false,
    sse: false,
    protocol: 'chat',
    ...over,
  });
  it.each([
    ['complete JSON with usage', facts(), read(USAGE), { kind: 'exact', usage: USAGE }],
    ['complete SSE chat with its usage chunk', facts({ sse: true }), read(USAGE), { kind: 'exact', usage: USAGE }],
    [
      'complete SSE messages with usage',
      facts({ sse: true, protocol: 'messages' }),
      read(USAGE),
      { kind: 'exact', usage: USAGE },
    ],
    [
      'complete JSON without usage',
      facts(),
      read(undefined),
      { kind: 'estimate', reason: 'no_usage', trusted: undefined },
    ],
    [
      'complete SSE chat without include_usage',
      facts({ sse: true }),
      read(undefined),
      { kind: 'estimate', reason: 'stream_without_usage', trusted: undefined },
    ],
    [
      'complete SSE of another protocol without usage',
      facts({ sse: true, protocol: 'responses' }),
      read(undefined),
      { kind: 'estimate', reason: 'no_usage', trusted: undefined },
    ],
    [
      'a stream cut with a partial usage',
      facts({ sse: true, ended: false }),
      read(USAGE),
      { kind: 'estimate', reason: 'incomplete', trusted: USAGE },
    ],
    [
      'a stream cut without usage',
      facts({ sse: true, ended: false }),
      read(undefined),
      { kind: 'estimate', reason: 'incomplete', trusted: undefined },
    ],
    [
      'a non-streaming answer cut',
      facts({ ended: false }),
      read(undefined),
      { kind: 'estimate', reason: 'incomplete', trusted: undefined },
    ],
    [
      'unanswered (upstream sent, nothing back)',
      facts({ unanswered: true, status: 504 }),
      read(undefined),
      { kind: 'estimate', reason: 'incomplete', trusted: undefined },
    ],
    [
      'no status with usage read',
      facts({ status: 0 }),
      read(USAGE),
      { kind: 'estimate', reason: 'incomplete', trusted: USAGE },
    ],
    [
      'unreadable (an encoding the meter cannot read)',
      facts(),
      read(undefined, true),
      { kind: 'estimate', reason: 'undecodable', trusted: undefined },
    ],
    [
      'unreadable beside plausible usage',
      facts(),
      read(USAGE, true),
      { kind: 'estimate', reason: 'undecodable', trusted: USAGE },
    ],
    [
      'usage marked implausible by its reader',
      facts(),
      read({ ...USAGE, implausible: true }),
      { kind: 'estimate', reason: 'implausible', trusted: undefined },
    ],
    [
      'output over the ceiling',
      facts(),
      read({ ...USAGE, outputTokens: CEILING.outputTokens + 1 }),
      { kind: 'estimate', reason: 'implausible', trusted: undefined },
    ],
    [
      'a negative count',
      facts(),
      read({ ...USAGE, inputTokens: -1 }),
      { kind: 'estimate', reason: 'implausible', trusted: undefined },
    ],
    [
      'a fractional count',
      facts(),
      read({ ...USAGE, outputTokens: 1.5 }),
      { kind: 'estimate', reason: 'implausible', trusted: undefined },
    ],
    [
      'cached input over the ceiling',
      facts(),
      read({ ...USAGE, cachedInputTokens: CEILING.inputTokens + 1 }),
      { kind: 'estimate', reason: 'implausible', trusted: undefined },
    ],
    [
      'a cut stream with implausible usage',
      facts({ ended: false, sse: true }),
      read({ ...USAGE, outputTokens: Number.NaN }),
      { kind: 'estimate', reason: 'implausible', trusted: undefined },
    ],
  ] as const)('%s', (_name, f, r, want) => {
    expect(classifyReport(f, r, CEILING)).toEqual(want);
  });

  it('is exact exactly when the answer ended, has a status, was read and its usage is plausible; then it is the usage read', () => {
    const usage = fc.record({
      inputTokens: fc.integer({ min: -5, max: 2 * CEILING.inputTokens }),
      outputTokens: fc.integer({ min: -5, max: 2 * CEILING.outputTokens }),
      cachedInputTokens: fc.integer({ min: 0, max: 1000 }),
    });
    fc.assert(
      fc.property(
        fc.record({
          status: fc.constantFrom(0, 200, 201, 206),
          ended: fc.boolean(),
          unanswered: fc.boolean(),
          sse: fc.boolean(),
          protocol: fc.constantFrom('chat', 'responses', 'messages', 'generative', 'embeddings') as fc.Arbitrary<
            ClassifyFacts['protocol']
          >,
        }),
        fc.option(usage, { nil: undefined }),
        fc.boolean(),
        (f, u, undecodable) => {
          const c = classifyReport(f, read(u, undecodable), CEILING);
          const exact = f.ended && f.status !== 0 && !undecodable && plausible(u, CEILING);
          expect(c.kind).toBe(exact ? 'exact' : 'estimate');
          if (c.kind === 'exact') expect(c.usage).toBe(u);
          else expect(c.trusted === undefined || c.trusted === u).toBe(true);
        },
      ),
    );
  });
});

describe("reportBounds: the request's maxima, from its entry or the Check's metadata", () => {
  it("takes its entry's, whatever the metadata says", () => {
    const entry = { maxInputTokens: 300, maxOutputTokens: 50, outputHidden: true, inputExtra: 7, inputFactor: 2 };
    expect(reportBounds(entry, { maxInput: 9, maxOutput: 9 }, [], 'gpt-4o-mini')).toEqual({
      maxInput: 300,
      maxOutput: 50,
      hidden: true,
      inputExtra: 7,
      inputFactor: 2,
    });
    expect(reportBounds({ maxInputTokens: 300, maxOutputTokens: 50 }, {}, ['gpt-4o*'], 'gpt-4o-mini')).toEqual({
      maxInput: 300,
      maxOutput: 50,
      hidden: false,
      inputExtra: 0,
      inputFactor: 1,
    });
  });

  it.each([
    [
      "no metadata: unbounded, the model's name says hidden",
      {},
      ['o3*'],
      'o3-mini',
      { maxInput: undefined, maxOutput: undefined, hidden: true, inputExtra: 0, inputFactor: 1 },
    ],
    [
      "the Check's maxima",
      { maxInput: 400, maxOutput: 64 },
      [],
      'gpt-4o-mini',
      { maxInput: 400, maxOutput: 64, hidden: false, inputExtra: 0, inputFactor: 1 },
    ],
    [
      'hiddenOutput stands for a missing maxOutput',
      { maxInput: 400, hiddenOutput: 128 },
      [],
      'gpt-4o-mini',
      { maxInput: 400, maxOutput: 128, hidden: true, inputExtra: 0, inputFactor: 1 },
    ],
    [
      'marks that are not counts are ignored',
      { maxInput: -1, maxOutput: 'x', inputExtra: Number.NaN, inputFactor: 0.5 },
      [],
      'm',
      { maxInput: undefined, maxOutput: undefined, hidden: false, inputExtra: 0, inputFactor: 1 },
    ],
    [
      'an input factor and extra',
      { inputExtra: 2500, inputFactor: 2 },
      [],
      'm',
      { maxInput: undefined, maxOutput: undefined, hidden: false, inputExtra: 2500, inputFactor: 2 },
    ],
  ] as const)('without an entry: %s', (_name, authz, reasoning, model, want) => {
    expect(reportBounds(undefined, authz, reasoning, model)).toEqual(want);
  });
});

describe('outputPlan: how an estimate counts output', () => {
  const facts = (over: Partial<OutputFacts> = {}): OutputFacts => ({
    embeds: false,
    unanswered: false,
    ended: true,
    upstreamAnswered: true,
    streamed: false,
    hidden: false,
    responseBodyBytes: 500,
    ...over,
  });
  it.each([
    ['a complete answer without usage: from its text', facts(), { kind: 'from_answer' }],
    ['a complete answer of no bytes: none', facts({ responseBodyBytes: 0 }), { kind: 'none' }],
    ['a cut stream: from its text', facts({ ended: false, streamed: true }), { kind: 'from_answer' }],
    [
      'a cut non-streaming answer: its maximum (billed whole)',
      facts({ ended: false }),
      { kind: 'maximum', tokens: 777 },
    ],
    [
      'unanswered: its maximum',
      facts({ unanswered: true, upstreamAnswered: false, responseBodyBytes: 0 }),
      { kind: 'maximum', tokens: 777 },
    ],
    ['hidden output (reasoning, a field mask): its maximum', facts({ hidden: true }), { kind: 'maximum', tokens: 777 }],
    [
      'embeddings: none, even cut or unanswered',
      facts({ embeds: true, unanswered: true, ended: false, hidden: true }),
      { kind: 'none' },
    ],
  ] as const)('%s', (_name, f, want) => {
    expect(outputPlan(f, 777)).toEqual(want);
  });
});

describe('boundEstimate', () => {
  it.each([
    [
      'within the maxima',
      { input: 100, output: 50 },
      { maxInput: 300, maxOutput: 60 },
      undefined,
      { inputTokens: 100, outputTokens: 50, cachedInputTokens: 0 },
    ],
    [
      'clamped to the maxima',
      { input: 900, output: 500 },
      { maxInput: 300, maxOutput: 60 },
      undefined,
      { inputTokens: 300, outputTokens: 60, cachedInputTokens: 0 },
    ],
    [
      'no maxima known: as estimated',
      { input: 900, output: 500 },
      { maxInput: undefined, maxOutput: undefined },
      undefined,
      { inputTokens: 900, outputTokens: 500, cachedInputTokens: 0 },
    ],
    [
      'a partial count stands as a floor',
      { input: 10, output: 5 },
      { maxInput: 300, maxOutput: 60 },
      USAGE,
      { inputTokens: 120, outputTokens: 40, cachedInputTokens: 20 },
    ],
    [
      'a partial count above the maxima stands',
      { input: 10, output: 5 },
      { maxInput: 50, maxOutput: 30 },
      USAGE,
      { inputTokens: 120, outputTokens: 40, cachedInputTokens: 20 },
    ],
    [
      "a partial count of no input: the estimate's input, cached within it",
      { input: 10, output: 5 },
      { maxInput: 300, maxOutput: 60 },
      { inputTokens: 0, outputTokens: 3, cachedInputTokens: 0 },
      { inputTokens: 10, outputTokens: 5, cachedInputTokens: 0 },
    ],
    [
      'output within the ceiling',
      { input: 1, output: 5_000_000 },
      { maxInput: undefined, maxOutput: undefined },
      undefined,
      { inputTokens: 1, outputTokens: CEILING.outputTokens, cachedInputTokens: 0 },
    ],
  ] as const)('%s', (_name, e, b, t, want) => {
    expect(boundEstimate(e, b, t, CEILING)).toEqual(want);
  });

  const count = fc.integer({ min: 0, max: 5_000_000 });
  const maybe = fc.option(fc.integer({ min: 0, max: 2_000_000 }), { nil: undefined });
  const trustedUsage = fc.option(
    fc.record({
      inputTokens: fc.integer({ min: 0, max: 1_000_000 }),
      outputTokens: fc.integer({ min: 0, max: CEILING.outputTokens }),
      cachedInputTokens: fc.integer({ min: 0, max: 1_000_000 }),
    }),
    { nil: undefined },
  );

  it('never debits below what the provider reported (input, output), and never more cached input than input', () => {
    fc.assert(
      fc.property(count, count, maybe, maybe, trustedUsage, (input, output, maxInput, maxOutput, trusted) => {
        const u = boundEstimate({ input, output }, { maxInput, maxOutput }, trusted, CEILING);
        if (trusted) {
          expect(u.outputTokens).toBeGreaterThanOrEqual(trusted.outputTokens);
          expect(u.inputTokens).toBeGreaterThanOrEqual(trusted.inputTokens);
        }
        expect(u.cachedInputTokens).toBeLessThanOrEqual(u.inputTokens);
        expect(u.outputTokens).toBeLessThanOrEqual(CEILING.outputTokens);
      }),
    );
  });

  it("never estimates past the request's maxima, except where the provider's own count is higher", () => {
    fc.assert(
      fc.property(count, count, maybe, maybe, trustedUsage, (input, output, maxInput, maxOutput, trusted) => {
        const u = boundEstimate({ input, output }, { maxInput, maxOutput }, trusted, CEILING);
        if (maxInput !== undefined && !(trusted && trusted.inputTokens > 0))
          expect(u.inputTokens).toBeLessThanOrEqual(maxInput);
        if (maxOutput !== undefined)
          expect(u.outputTokens).toBeLessThanOrEqual(Math.max(maxOutput, trusted?.outputTokens ?? 0));
      }),
    );
  });
});

describe('a report settled end to end by the policy (route, classify, bounds, plan, bound)', () => {
  /** What Meter#settleReport computes from these, with a fixed estimator (input 77, output 33 tokens). */
  function settle(
    end: ReportEnd,
    f: { sse: boolean; streamed: boolean; hidden: boolean; bytes: number },
    r: ReadUsage,
    maxInput: number,
    maxOutput: number,
  ) {
    const route = routeReport(true, end);
    if (route.kind === 'release') return route;
    const c = classifyReport(
      { status: end.status, ended: end.ended, unanswered: route.unanswered, sse: f.sse, protocol: 'chat' },
      route.readAnswer ? r : read(undefined),
      CEILING,
    );
    if (c.kind === 'exact') return c;
    const plan = outputPlan(
      {
        embeds: false,
        unanswered: route.unanswered,
        ended: end.ended,
        upstreamAnswered: end.upstreamAnswered,
        streamed: f.streamed,
        hidden: f.hidden,
        responseBodyBytes: f.bytes,
      },
      maxOutput,
    );
    const output = plan.kind === 'maximum' ? plan.tokens : plan.kind === 'from_answer' ? 33 : 0;
    const input = c.trusted && c.trusted.inputTokens > 0 ? c.trusted.inputTokens : 77;
    return { ...c, usage: boundEstimate({ input, output }, { maxInput, maxOutput }, c.trusted, CEILING) };
  }
  const ends = fc.record({
    status: fc.constantFrom(0, 200, 504),
    ended: fc.boolean(),
    upstreamSent: fc.boolean(),
    upstreamAnswered: fc.boolean(),
  });
  const shape = fc.record({
    sse: fc.boolean(),
    streamed: fc.boolean(),
    hidden: fc.boolean(),
    bytes: fc.integer({ min: 0, max: 100_000 }),
  });
  const partial = fc.option(
    fc.record({
      inputTokens: fc.integer({ min: 0, max: 5000 }),
      outputTokens: fc.integer({ min: 0, max: 5000 }),
      cachedInputTokens: fc.constant(0),
    }),
    { nil: undefined },
  );

  it('debits an unanswered request and a cut non-streaming answer their maximum output', () => {
    fc.assert(
      fc.property(ends, shape, partial, fc.integer({ min: 1, max: 200_000 }), (end, f, u, maxOutput) => {
        const s = settle(end, { ...f, streamed: f.streamed || f.sse }, read(u), 1000, maxOutput);
        const unanswered = end.upstreamSent && !end.upstreamAnswered;
        const cutWhole = !end.ended && end.upstreamAnswered && !(f.streamed || f.sse);
        if (s.kind === 'estimate' && (unanswered || cutWhole))
          expect(s.usage.outputTokens).toBe(Math.max(maxOutput, s.trusted?.outputTokens ?? 0));
        if (unanswered) expect(s.kind).toBe('estimate');
      }),
    );
  });

  it('debits a cut stream at least the partial count it reported', () => {
    fc.assert(
      fc.property(shape, partial, fc.integer({ min: 1, max: 200_000 }), (f, u, maxOutput) => {
        const s = settle(
          { status: 200, ended: false, upstreamSent: true, upstreamAnswered: true },
          { ...f, sse: true, streamed: true },
          read(u),
          1000,
          maxOutput,
        );
        expect(s.kind).toBe('estimate');
        if (s.kind === 'estimate' && u) expect(s.usage.outputTokens).toBeGreaterThanOrEqual(u.outputTokens);
        if (s.kind === 'estimate' && u && u.inputTokens > 0) expect(s.usage.inputTokens).toBe(u.inputTokens);
      }),
    );
  });
});
