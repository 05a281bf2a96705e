/**
 * The answers of a protocol that has no quirk of a kind: spread into a module's rules, then
 * overridden where the protocol differs, so each module lists only what it does.
 */
import type { AdmissionRules, ShapeRules } from './provider';

/** A request that says nothing beyond the common fields. */
export const PLAIN_SHAPE_RULES: ShapeRules = {
  streamsByPath: () => false,
  embeds: () => false,
  embedsOnly: false,
  storedInput: () => false,
  background: () => false,
  reasons: () => false,
  maxToolCalls: () => undefined,
  pricedTier: () => undefined,
  outputModalities: () => undefined,
  inputModalities: () => undefined,
  inputCost: () => ({ providerInput: 0, inputFactor: 1 }),
};

/** Every answer format readable, nothing trimmed, no cap raised. */
export const PLAIN_ADMISSION_RULES: AdmissionRules = {
  unreadableFormat: () => undefined,
  trimsAnswer: () => false,
  raisesOutputCap: () => false,
};
