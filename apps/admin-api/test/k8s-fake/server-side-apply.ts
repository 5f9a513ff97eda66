// Server-side apply as kube-apiserver does it (structured-merge-diff), for the fields our manifests
// use: each manager owns a set of field paths; an apply merges maps, merges lists that have a merge key
// (containers by name, ports by containerPort/port, ...) and replaces atomic lists; a field another
// manager owns with a different value is a conflict (409) unless the apply is forced, which takes it
// over; a field the applier owned before and no longer sends is removed unless someone else owns it.

type Json = unknown;
type Obj = Record<string, Json>;

/** One managedFields entry, with its field set kept as paths. */
export interface Manager {
  manager: string;
  operation: 'Apply' | 'Update';
  subresource?: string;
  apiVersion: string;
  time: string;
  paths: Set<string>;
}

export interface Conflict {
  readonly manager: string;
  readonly path: string;
}

const MERGE_KEYS: Record<string, readonly string[]> = {
  containers: ['name'],
  initContainers: ['name'],
  volumes: ['name'],
  volumeMounts: ['mountPath'],
  env: ['name'],
  ports: ['containerPort', 'port'],
  imagePullSecrets: ['name'],
};
const IDENTITY = new Set([
  'apiVersion',
  'kind',
  'metadata.name',
  'metadata.namespace',
  'metadata.resourceVersion',
  'metadata.managedFields',
  'metadata.uid',
  'metadata.creationTimestamp',
  'metadata.generation',
  'status',
]);
const isObj = (v: Json): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function keyOf(item: Json, field: string): string | null {
  if (!isObj(item)) return null;
  const keys = MERGE_KEYS[field];
  if (!keys) return null;
  const k = keys.find((x) => item[x] !== undefined);
  return k === undefined ? null : `k:${JSON.stringify({ [k]: item[k] })}`;
}

/** Leaf paths of an object (segments joined by '/'), skipping identity and server-owned fields. */
export function fieldPaths(obj: Json, prefix = '', dotted = '', out = new Set<string>()): Set<string> {
  if (!isObj(obj)) return out;
  for (const [k, v] of Object.entries(obj)) {
    const d = dotted ? `${dotted}.${k}` : k;
    if (IDENTITY.has(d)) continue;
    const p = `${prefix ? `${prefix}/` : ''}f:${k}`;
    if (isObj(v) && Object.keys(v).length > 0) fieldPaths(v, p, d, out);
    else if (Array.isArray(v) && MERGE_KEYS[k] && v.every((i) => keyOf(i, k) !== null)) {
      for (const item of v) {
        const ip = `${p}/${keyOf(item, k)}`;
        out.add(`${ip}/.`);
        fieldPaths(item, ip, `${d}[]`, out);
      }
    } else out.add(p);
  }
  return out;
}

function segments(path: string): string[] {
  const out: string[] = [];
  let cur = '';
  let depth = 0;
  for (const ch of path) {
    if (ch === '{') depth++;
    if (ch === '}') depth--;
    if (ch === '/' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out;
}

/** The value at a path, or undefined. */
export function valueAt(obj: Json, path: string): Json {
  let cur: Json = obj;
  let lastField = '';
  for (const seg of segments(path)) {
    if (seg === '.') return cur;
    if (seg.startsWith('f:')) {
      lastField = seg.slice(2);
      cur = isObj(cur) ? cur[lastField] : undefined;
    } else if (seg.startsWith('k:')) {
      cur = Array.isArray(cur) ? cur.find((i) => keyOf(i, lastField) === seg) : undefined;
    }
    if (cur === undefined) return undefined;
  }
  return cur;
}

/** Removes the field (or list item) at a path. */
function removeAt(obj: Json, path: string): void {
  const segs = segments(path);
  if (segs[segs.length - 1] === '.') segs.pop();
  let cur: Json = obj;
  let lastField = '';
  for (let i = 0; i < segs.length; i++) {
    const seg = segs[i] ?? '';
    const last = i === segs.length - 1;
    if (seg.startsWith('f:')) {
      lastField = seg.slice(2);
      if (!isObj(cur)) return;
      if (last) Reflect.deleteProperty(cur, lastField);
      else cur = cur[lastField];
    } else if (seg.startsWith('k:')) {
      if (!Array.isArray(cur)) return;
      const idx = cur.findIndex((x) => keyOf(x, lastField) === seg);
      if (idx < 0) return;
      if (last) cur.splice(idx, 1);
      else cur = cur[idx];
    }
  }
}

/** Merges `patch` into `live` (both plain JSON): maps recursively, keyed lists by key, anything else replaced. */
export function mergeApplied(live: Json, patch: Json, field = ''): Json {
  if (isObj(live) && isObj(patch)) {
    const out: Obj = { ...live };
    for (const [k, v] of Object.entries(patch)) out[k] = k in live ? mergeApplied(live[k], v, k) : structuredClone(v);
    return out;
  }
  if (Array.isArray(live) && Array.isArray(patch) && MERGE_KEYS[field] && patch.every((i) => keyOf(i, field) !== null)) {
    const out = live.map((x) => structuredClone(x) as Json);
    for (const item of patch) {
      const idx = out.findIndex((x) => keyOf(x, field) === keyOf(item, field));
      if (idx >= 0) out[idx] = mergeApplied(out[idx], item, field);
      else out.push(structuredClone(item));
    }
    return out;
  }
  return structuredClone(patch);
}

export interface ApplyResult {
  readonly object: Obj;
  readonly managers: Manager[];
  readonly conflicts: Conflict[];
}

/** Applies `config` as `manager` onto `live` (null: create). Conflicts are returned, not thrown; nothing changes when there are any and force is off. */
export function serverSideApply(live: Obj | null, managers: readonly Manager[], config: Obj, manager: string, force: boolean, now: string): ApplyResult {
  const applied = fieldPaths(config);
  const base: Obj = live ? structuredClone(live) : {};
  const others = managers.filter((m) => !(m.manager === manager && m.operation === 'Apply' && !m.subresource)).map((m) => ({ ...m, paths: new Set(m.paths) }));
  const conflicts: Conflict[] = [];
  for (const p of applied) {
    for (const m of others) {
      if (!m.paths.has(p)) continue;
      if (p.endsWith('/.')) continue; // a list item's existence: shared, never a value conflict
      if (JSON.stringify(valueAt(base, p)) === JSON.stringify(valueAt(config, p))) continue; // same value: shared ownership
      if (force) m.paths.delete(p);
      else conflicts.push({ manager: m.manager, path: p });
    }
  }
  if (conflicts.length > 0 && !force) return { object: base, managers: [...managers], conflicts };
  const previous = managers.find((m) => m.manager === manager && m.operation === 'Apply' && !m.subresource)?.paths ?? new Set<string>();
  let object = mergeApplied(base, config) as Obj;
  for (const p of previous) {
    if (applied.has(p) || others.some((m) => m.paths.has(p))) continue;
    removeAt(object, p);
  }
  object = object as Obj;
  const next: Manager[] = [
    ...others.filter((m) => m.paths.size > 0),
    { manager, operation: 'Apply', apiVersion: String(config.apiVersion ?? 'v1'), time: now, paths: applied },
  ];
  return { object, managers: next, conflicts: [] };
}

/** A non-apply write (PUT, merge patch, scale): the writer takes the fields it changed, from whoever held them. */
export function recordUpdate(
  before: Obj | null,
  after: Obj,
  managers: readonly Manager[],
  manager: string,
  apiVersion: string,
  now: string,
  subresource?: string,
): Manager[] {
  const oldPaths = before ? fieldPaths(before) : new Set<string>();
  const newPaths = fieldPaths(after);
  const changed = new Set<string>();
  for (const p of newPaths) if (!oldPaths.has(p) || JSON.stringify(valueAt(before, p)) !== JSON.stringify(valueAt(after, p))) changed.add(p);
  const next = managers.map((m) => ({ ...m, paths: new Set([...m.paths].filter((p) => !changed.has(p) && newPaths.has(p))) }));
  if (changed.size === 0) return next.filter((m) => m.paths.size > 0);
  const mine = next.find((m) => m.manager === manager && m.operation === 'Update' && m.subresource === subresource);
  if (mine) {
    for (const p of changed) mine.paths.add(p);
    mine.time = now;
  } else next.push({ manager, operation: 'Update', apiVersion, time: now, paths: changed, ...(subresource ? { subresource } : {}) });
  return next.filter((m) => m.paths.size > 0);
}

/** managedFields as the API shows them (fieldsV1 trees). */
export function managedFieldsJson(managers: readonly Manager[]): Obj[] {
  return managers.map((m) => {
    const tree: Obj = {};
    for (const p of m.paths) {
      let cur = tree;
      for (const seg of segments(p)) {
        cur[seg] = (cur[seg] as Obj | undefined) ?? {};
        cur = cur[seg] as Obj;
      }
    }
    return {
      manager: m.manager,
      operation: m.operation,
      apiVersion: m.apiVersion,
      time: m.time,
      fieldsType: 'FieldsV1',
      fieldsV1: tree,
      ...(m.subresource ? { subresource: m.subresource } : {}),
    };
  });
}

/** `.spec.template.spec.containers[name="runtime"].image` for conflict messages. */
export function describePath(path: string): string {
  return segments(path)
    .filter((s) => s !== '.')
    .map((s) => (s.startsWith('f:') ? `.${s.slice(2)}` : `[${s.slice(2).replace(/^\{"(\w+)":(.*)\}$/, '$1=$2')}]`))
    .join('');
}
