/**
 * Long prompts (docs/metering.md, "Long prompts"): Gemini 3 Pro bills every token of a request whose
 * prompt is over 200,000 tokens at its long-context price (2/12 per million up to 200,000, 4/18
 * above). The demo prices gemini-3.1-pro-preview so (`longContext`); before it had one price, and a
 * key holder sending a 300,000-token prompt paid half what the provider bills. Through a real Envoy
 * and modelgate (file store) to the stand-in provider (support/money-upstream.ts), which counts a
 * prompt's words as its tokens and reports them in `usageMetadata.promptTokenCount`.
 */
import { expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import type { MoneyUpstream } from '../support/money-upstream';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { balanceOfKey, inMode, request, withMoneyGateway, withMoneyKeys } from '../support/money-client';

const MODEL = 'gemini-3.1-pro-preview';
const PATH = `/v1beta/models/${MODEL}:generateContent`;
/** The demo's price of MODEL: its own up to 200,000 input tokens, its long-context price above. */
const BASE = { input: 2, output: 12 };
const LONG = { input: 4, output: 18 };

/** A prompt of `words` words (the stand-in's tokens; "user" is one more), `output` tokens asked for. */
const body = (words: number, output: number) => ({
  contents: [{ role: 'user', parts: [{ text: 'a '.repeat(words).trimEnd() }] }],
  generationConfig: { maxOutputTokens: output },
});
const bytesOf = (b: unknown): number => Buffer.byteLength(JSON.stringify(b));
const cost = (input: number, output: number, p: { input: number; output: number }): number =>
  (input * p.input + output * p.output) / 1e6;

const keys = { soft: generateKey(), strict: generateKey(), tight: generateKey(), late: generateKey() };
const header = (k: keyof typeof keys): Record<string, string> => ({ 'x-goog-api-key': keys[k] });

async function rowsOf(store: FileStore, keyId: string, n: number): Promise<UsageEntry[]> {
  let rows: UsageEntry[] = [];
  await waitFor(
    `${n} ledger rows of ${keyId}`,
    async () => (rows = await store.meter!.usage({ keyId, limit: 10 })).length === n,
    60_000,
  );
  return rows;
}

describeE2E(
  'long prompts, soft mode: a prompt over 200,000 tokens is debited every token at the long-context price',
  () => {
    let gw: Gateway;
    let store: FileStore;
    withMoneyGateway(
      withMoneyKeys({ soft: keys.soft }, () => 10, 'lc'),
      (s) => ({ gw, store } = s),
    );

    it("300,001 input tokens and 1,000 output: debited (300,001 x 4 + 1,000 x 18) / 1e6, not (300,001 x 2 + 1,000 x 12) / 1e6; a prompt under the threshold pays the model's own price", async () => {
      const long = await request(gw, PATH, header('soft'), body(300_000, 1000));
      expect(long.status, long.text.slice(0, 300)).toBe(200);
      const usage = (
        JSON.parse(long.text) as { usageMetadata: { promptTokenCount: number; candidatesTokenCount: number } }
      ).usageMetadata;
      expect(usage.promptTokenCount).toBe(300_001);
      const [row] = await rowsOf(store, 'lc-soft', 1);
      expect(row).toMatchObject({ inputTokens: 300_001, outputTokens: 1000, model: MODEL });
      // Seen before (one price): 0.612002, half the input's bill.
      expect(row.cost).toBe(cost(300_001, 1000, LONG));
      expect(cost(300_001, 1000, BASE)).toBe(0.612002);
      expect(row.cost).toBe(1.218004);

      const short = await request(gw, PATH, header('soft'), body(150_000, 1000));
      expect(short.status).toBe(200);
      const rows = await rowsOf(store, 'lc-soft', 2);
      const shortRow = rows.find((r) => r.inputTokens === 150_001) as UsageEntry;
      expect(shortRow.cost).toBe(cost(150_001, 1000, BASE));
      expect(await balanceOfKey(store, keys.soft)).toBeCloseTo(10 - row.cost - shortRow.cost, 9);
    }, 120_000);
  },
);

describeE2E(
  'long prompts, strict mode: the reservation is at the long-context price, so no balance goes below zero',
  () => {
    let gw: Gateway;
    let store: FileStore;
    // A 300,000-word prompt of 2,000 output tokens: at the model's own price its maximum (one token
    // a byte: about 600,070 x 2 + 2,000 x 12) is below what the provider bills it (300,001 x 4 +
    // 2,000 x 18). A balance between the two had been reserved the lower and gone below zero.
    const req = body(300_000, 2000);
    const billed = cost(300_001, 2000, LONG);
    const lowMax = cost(bytesOf(req), 2000, BASE);
    const tight = (lowMax + billed) / 2;
    const balances: Record<string, number> = { strict: 2.5, tight };
    withMoneyGateway(
      (d) => inMode('strict')(withMoneyKeys({ strict: keys.strict, tight: keys.tight }, (k) => balances[k], 'lc')(d)),
      (s) => ({ gw, store } = s),
    );

    it("a balance between the model's own maximum and what the provider bills: refused (its maximum is at the long-context price); a balance that covers it: served, debited at that price, the next one refused; never below zero", async () => {
      // Seen with the maximum at the model's own price (1.22419 here): tight (1.230097) was served, to
      // be debited 1.236004, 0.005907 past its balance.
      expect(lowMax).toBeLessThan(tight);
      expect(billed).toBeGreaterThan(tight);
      const refused = await request(gw, PATH, header('tight'), req);
      expect(refused.status, refused.text.slice(0, 300)).toBe(403);
      expect(refused.text).toContain('balance_insufficient');
      expect(await balanceOfKey(store, keys.tight)).toBe(tight);

      const served = await request(gw, PATH, header('strict'), req);
      expect(served.status, served.text.slice(0, 300)).toBe(200);
      const [row] = await rowsOf(store, 'lc-strict', 1);
      expect(row.cost).toBe(billed);
      const after = await balanceOfKey(store, keys.strict);
      expect(after).toBeCloseTo(2.5 - billed, 9);
      // 1.264 left, a maximum of about 2.44: refused.
      const again = await request(gw, PATH, header('strict'), req);
      expect(again.status).toBe(403);
      expect(await balanceOfKey(store, keys.strict)).toBeGreaterThanOrEqual(0);
    }, 120_000);
  },
);

describeE2E(
  "long prompts: a report that finds no entry (after the request's deadline) pays the long-context price the Check's metadata carries",
  () => {
    let gw: Gateway;
    let up: MoneyUpstream;
    let store: FileStore;
    const config = (d: string): string =>
      withMoneyKeys(
        { late: keys.late },
        () => 10,
        'lc',
      )(d).replace('  reservationSeconds: 900 ', '  reservationSeconds: 1 ');
    withMoneyGateway(config, (s) => ({ gw, up, store } = s));

    it("settled provisionally at its maximum at the deadline, then by its report at (300,001 x 4 + 1,000 x 18) / 1e6 (the long-context price in the metadata's price)", async () => {
      const pending = request(gw, PATH, { ...header('late'), 'x-stand-in-gate': 'late' }, body(300_000, 1000));
      await waitFor(
        'the provisional debit at the deadline',
        async () => (await store.meter!.usage({ keyId: 'lc-late', limit: 10 })).some((r) => r.provisional),
        60_000,
      );
      up.open('late');
      expect((await pending).status).toBe(200);
      await waitFor(
        'the report to replace it',
        async () => (await store.meter!.usage({ keyId: 'lc-late', limit: 10 })).some((r) => !r.provisional),
        60_000,
      );
      const [row] = await store.meter!.usage({ keyId: 'lc-late', limit: 10 });
      expect(row).toMatchObject({ inputTokens: 300_001, outputTokens: 1000 });
      expect(row.cost).toBe(cost(300_001, 1000, LONG));
      expect(await balanceOfKey(store, keys.late)).toBeCloseTo(10 - row.cost, 9);
    }, 120_000);
  },
);
