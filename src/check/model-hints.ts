/**
 * Hints for 403 model_not_in_group that follow the spec's model-not-found checks (docs/spec.md §7):
 * (1) the key's group, (2) the group's models, (3) typos and extra spaces, (4) the protocol,
 * (5) availability. Suggestions come only from the key's own group: a hint never reveals another
 * group's models.
 */
import { HINTS } from '../contract/reasons';
import { printable } from '../contract/safe-text';
import type { GroupRecord } from '../store/store';

const MAX_COMPARED_LENGTH = 128;

/**
 * A model of the group that the client probably meant (docs/spec.md §7 check 3): the same name without
 * leading or trailing spaces, the same name in another case, or a near typo. Only names of the
 * key's own group are considered.
 */
export type ModelSuggestion = { readonly why: 'spaces' | 'case' | 'typo'; readonly name: string };

export function suggestModel(model: string, group: GroupRecord): ModelSuggestion | undefined {
  const trimmed = model.trim();
  if (trimmed !== model && group.models.has(trimmed)) return { why: 'spaces', name: trimmed };
  if (model.length > MAX_COMPARED_LENGTH) return undefined;
  const lower = trimmed.toLowerCase();
  for (const name of group.models.keys()) {
    if (name.toLowerCase() === lower) return { why: 'case', name };
  }
  const near = nearest(trimmed, group.models.keys());
  return near === undefined ? undefined : { why: 'typo', name: near };
}

/** The hint for a model the key's group does not contain. */
export function modelNotInGroupHint(model: string, group: GroupRecord, listPath: string): string {
  const shown = JSON.stringify(printable(model));
  const s = suggestModel(model, group);
  if (s?.why === 'spaces') return HINTS.model_not_in_group.spaces(shown, s.name);
  if (s?.why === 'case') return HINTS.model_not_in_group.case(shown, s.name);
  if (s?.why === 'typo') return HINTS.model_not_in_group.typo(shown, s.name);
  return HINTS.model_not_in_group.notInGroup(group.name, shown, listPath);
}

/** The closest name within a small edit distance (Damerau-Levenshtein, optimal string alignment). */
function nearest(word: string, names: Iterable<string>): string | undefined {
  const limit = word.length <= 4 ? 1 : word.length <= 12 ? 2 : 3;
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const name of names) {
    if (Math.abs(name.length - word.length) > limit) continue;
    const d = editDistance(word.toLowerCase(), name.toLowerCase(), bestDistance);
    if (d < bestDistance) {
      bestDistance = d;
      best = name;
    }
  }
  return best;
}

function editDistance(a: string, b: string, cap: number): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) rows.push([i]);
  for (let j = 1; j <= b.length; j++) rows[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    let rowMin = Infinity;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2][j - 2] + 1);
      rows[i][j] = d;
      rowMin = Math.min(rowMin, d);
    }
    if (rowMin >= cap) return cap;
  }
  return rows[a.length][b.length];
}
