const collator = new Intl.Collator('en', { sensitivity: 'base', numeric: true });

/** Names as people sort them: case-insensitive ("deepseek" beside "DeepSeek"), numbers by value ("2" before "10"). */
export function compareNames(a: string, b: string): number {
  return collator.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0);
}

/** A copy of `list` sorted by its `name`s with `compareNames`. */
export const sortByName = <T extends { readonly name: string }>(list: readonly T[]): T[] => [...list].sort((x, y) => compareNames(x.name, y.name));
