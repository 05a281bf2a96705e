/**
 * What a group really offers (docs/spec.md §1: "the real list is what the console and the models
 * endpoints return"): the one function behind both the model lists (server/catalog.ts) and the
 * console's "My access" (console/access.ts), so the two cannot disagree.
 *
 * A model list of a protocol family shows a model when it is available and served on one of the
 * family's protocol styles; the console shows every model of the group, each with the lists that
 * show it.
 */
import type { Family } from '../contract/error-body';
import type { GroupRecord, ModelRecord, Protocol } from '../store/store';

/** Which protocol styles the model list of each family shows. */
export const FAMILY_PROTOCOLS: Readonly<Record<Family, readonly Protocol[]>> = {
  openai: ['chat', 'responses', 'embeddings'],
  anthropic: ['messages'],
  gemini: ['generative'],
};

const FAMILIES: readonly Family[] = ['openai', 'anthropic', 'gemini'];

/** true when the model list of `family` shows `m`. */
export function isListed(m: ModelRecord, family: Family): boolean {
  return m.available && (m.protocols === null || m.protocols.some((p) => FAMILY_PROTOCOLS[family].includes(p)));
}

/** One model of a group, with the model lists that show it. */
export interface OfferedModel {
  readonly model: ModelRecord;
  /** The families whose model list shows it (none when it is unavailable). */
  readonly listedOn: readonly Family[];
}

/** Every model of the group, in the group's order. */
export function offeredModels(group: GroupRecord): OfferedModel[] {
  return [...group.models.values()].map((model) => ({ model, listedOn: FAMILIES.filter((f) => isListed(model, f)) }));
}

/** The models the list of `family` shows, in the group's order. */
export function listedModels(group: GroupRecord, family: Family): ModelRecord[] {
  return offeredModels(group)
    .filter((m) => m.listedOn.includes(family))
    .map((m) => m.model);
}
