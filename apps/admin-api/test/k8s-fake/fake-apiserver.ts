// A fake kube-apiserver over real HTTP: exactly the subset the Kubernetes provisioner uses, with
// Kubernetes' semantics (see ../../src/modules/deployments/provisioners/kubernetes/README.md).
// Objects live in memory under one global resourceVersion; every change is an event in a bounded
// history that watches replay from their resourceVersion (older than the history: 410 Gone).
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Deployment } from 'kubernetes-models/apps/v1';
import { Pod, Service } from 'kubernetes-models/v1';
import { describePath, managedFieldsJson, recordUpdate, serverSideApply, type Manager } from './server-side-apply.ts';

type Obj = Record<string, unknown> & {
  metadata: Record<string, unknown> & { name: string; namespace: string; labels?: Record<string, string>; annotations?: Record<string, string> };
};
export type Resource = 'pods' | 'services' | 'deployments';
type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface Stored {
  obj: Obj;
  managers: Manager[];
}
interface WatchEvent {
  readonly rv: number;
  readonly type: EventType;
  readonly resource: Resource;
  readonly obj: Obj;
}
interface Watcher {
  readonly resource: Resource;
  readonly namespace: string;
  readonly selector: string | undefined;
  readonly res: ServerResponse;
}

const KIND: Record<Resource, { kind: string; apiVersion: string; group: string }> = {
  pods: { kind: 'Pod', apiVersion: 'v1', group: '' },
  services: { kind: 'Service', apiVersion: 'v1', group: '' },
  deployments: { kind: 'Deployment', apiVersion: 'apps/v1', group: 'apps' },
};
const qualified = (r: Resource) => (KIND[r].group ? `${r}.${KIND[r].group}` : r);

export class StatusError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: Record<string, unknown> | undefined;
  constructor(code: number, reason: string, message: string, details?: Record<string, unknown>) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.details = details;
  }
}

/** `a=b,c!=d,e` (equality-based selectors, what label selectors over HTTP use here). */
export function matchesSelector(labels: Record<string, string> | undefined, selector: string | undefined): boolean {
  if (!selector) return true;
  const l = labels ?? {};
  return selector.split(',').every((term) => {
    const t = term.trim();
    if (!t) return true;
    const ne = /^([^!=]+)!=(.*)$/.exec(t);
    if (ne) return l[ne[1]!.trim()] !== ne[2]!.trim();
    const eq = /^([^!=]+)==?(.*)$/.exec(t);
    if (eq) return l[eq[1]!.trim()] === eq[2]!.trim();
    if (t.startsWith('!')) return !(t.slice(1) in l);
    return t in l;
  });
}

export interface FakeApiServerOptions {
  /** Namespaces that exist (others answer 404). */
  readonly namespaces?: readonly string[];
  /** Events kept for watches to resume from (default 1000). */
  readonly historyLimit?: number;
  /** Interval of BOOKMARK events on watches that asked for them (default 200 ms). */
  readonly bookmarkMs?: number;
  /** Identity RBAC messages name. */
  readonly user?: string;
}

export interface RequestLogEntry {
  readonly method: string;
  readonly path: string;
  readonly query: Record<string, string>;
  readonly contentType: string | undefined;
  readonly status: number;
}

/** The fake API server; the kubelet/controllers simulation drives it through `onChange` and the write helpers. */
export class FakeApiServer {
  readonly server: Server;
  readonly requests: RequestLogEntry[] = [];
  readonly namespaces: Set<string>;
  private readonly store = new Map<string, Stored>();
  private readonly history: WatchEvent[] = [];
  private readonly watchers = new Set<Watcher>();
  private readonly sockets = new Set<Socket>();
  private readonly forbidden = new Set<string>();
  private readonly listeners: ((resource: Resource, type: EventType, obj: Obj) => void)[] = [];
  private readonly intercepts: { method: string; pathSuffix: string; fn: () => void }[] = [];
  private rv = 100;
  private oldestRv = 100;
  private readonly historyLimit: number;
  private readonly bookmarkMs: number;
  private readonly user: string;
  private bookmarkTimer: NodeJS.Timeout | undefined;
  private clusterIp = 1;
  /** Watches answered 410 Gone because their resourceVersion was compacted away. */
  goneCount = 0;
  /** Services the namespace's quota allows (undefined: no quota). */
  serviceQuota: number | undefined;

  constructor(opts: FakeApiServerOptions = {}) {
    this.namespaces = new Set(opts.namespaces ?? ['default']);
    this.historyLimit = opts.historyLimit ?? 1000;
    this.bookmarkMs = opts.bookmarkMs ?? 200;
    this.user = opts.user ?? 'system:serviceaccount:infer:control-plane';
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.once('close', () => this.sockets.delete(s));
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.bookmarkTimer = setInterval(() => this.sendBookmarks(), this.bookmarkMs);
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    clearInterval(this.bookmarkTimer);
    for (const w of this.watchers) w.res.destroy();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  // ---- test controls -------------------------------------------------------------------------------

  /** RBAC: `verb resource` (e.g. `patch deployments`) is refused with 403. */
  forbid(verb: string, resource: Resource): void {
    this.forbidden.add(`${verb} ${resource}`);
  }
  allow(verb: string, resource: Resource): void {
    this.forbidden.delete(`${verb} ${resource}`);
  }
  /** etcd compaction: every event so far is gone; a watch resuming from before now gets 410 Gone. */
  compact(): void {
    this.history.length = 0;
    this.oldestRv = this.rv;
  }
  /** Drops every watch connection abruptly (an apiserver restart or a network cut). */
  breakWatches(): void {
    for (const w of this.watchers) w.res.socket?.destroy();
    this.watchers.clear();
  }
  /** Ends every watch with an ERROR 410 event (what an apiserver sends when the watch cache moved past it). */
  expireWatches(): void {
    for (const w of this.watchers) {
      w.res.write(`${JSON.stringify({ type: 'ERROR', object: this.status(new StatusError(410, 'Expired', 'too old resource version')) })}\n`);
      w.res.end();
    }
    this.watchers.clear();
  }
  /** Runs `fn` just before the next request whose method and path match is handled (a concurrent writer, deterministically). */
  beforeNext(method: string, pathSuffix: string, fn: () => void): void {
    this.intercepts.push({ method, pathSuffix, fn });
  }
  get watchCount(): number {
    return this.watchers.size;
  }
  onChange(listener: (resource: Resource, type: EventType, obj: Obj) => void): void {
    this.listeners.push(listener);
  }

  get(resource: Resource, namespace: string, name: string): Obj | undefined {
    const s = this.store.get(this.key(resource, namespace, name));
    return s ? this.view(s) : undefined;
  }
  list(resource: Resource, namespace: string, selector?: string): Obj[] {
    return [...this.store.entries()]
      .filter(([k]) => k.startsWith(`${resource}/${namespace}/`))
      .map(([, s]) => this.view(s))
      .filter((o) => matchesSelector(o.metadata.labels, selector));
  }
  managedFields(resource: Resource, namespace: string, name: string): Manager[] {
    return this.store.get(this.key(resource, namespace, name))?.managers ?? [];
  }

  /** A controller's write (status, pods): no RBAC, no field manager of ours. */
  put(resource: Resource, obj: Obj, manager = 'kube-controller-manager'): Obj {
    const key = this.key(resource, obj.metadata.namespace, obj.metadata.name);
    const old = this.store.get(key);
    const next: Obj = structuredClone(obj);
    return this.commit(
      resource,
      key,
      next,
      recordUpdate(old?.obj ?? null, next, old?.managers ?? [], manager, KIND[resource].apiVersion, new Date().toISOString()),
      old ? 'MODIFIED' : 'ADDED',
    );
  }
  remove(resource: Resource, namespace: string, name: string): void {
    const key = this.key(resource, namespace, name);
    const old = this.store.get(key);
    if (!old) return;
    this.store.delete(key);
    const obj = { ...structuredClone(old.obj), metadata: { ...old.obj.metadata, resourceVersion: String(++this.rv) } } as Obj;
    this.emit({ rv: this.rv, type: 'DELETED', resource, obj });
  }

  // ---- HTTP ----------------------------------------------------------------------------------------

  private key(resource: Resource, namespace: string, name: string): string {
    return `${resource}/${namespace}/${name}`;
  }

  private view(s: Stored): Obj {
    const o = structuredClone(s.obj);
    o.metadata.managedFields = managedFieldsJson(s.managers);
    return o;
  }

  private status(err: StatusError): Record<string, unknown> {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: err.message,
      reason: err.reason,
      code: err.code,
      ...(err.details ? { details: err.details } : {}),
    };
  }

  private commit(resource: Resource, key: string, obj: Obj, managers: Manager[], type: EventType): Obj {
    obj.metadata.resourceVersion = String(++this.rv);
    delete obj.metadata.managedFields;
    this.store.set(key, { obj, managers });
    const view = this.view({ obj, managers });
    this.emit({ rv: this.rv, type, resource, obj: view });
    return view;
  }

  private emit(e: WatchEvent): void {
    this.history.push(e);
    while (this.history.length > this.historyLimit) this.oldestRv = this.history.shift()?.rv ?? this.oldestRv;
    for (const w of this.watchers) {
      if (w.resource === e.resource && w.namespace === e.obj.metadata.namespace && matchesSelector(e.obj.metadata.labels, w.selector)) {
        w.res.write(`${JSON.stringify({ type: e.type, object: e.obj })}\n`);
      }
    }
    for (const l of this.listeners) l(e.resource, e.type, e.obj);
  }

  private sendBookmarks(): void {
    for (const w of this.watchers) {
      if (!(w as Watcher & { bookmarks?: boolean }).bookmarks) continue;
      const { kind, apiVersion } = KIND[w.resource];
      w.res.write(`${JSON.stringify({ type: 'BOOKMARK', object: { kind, apiVersion, metadata: { resourceVersion: String(this.rv) } } })}\n`);
    }
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const query = Object.fromEntries(url.searchParams);
    const entry = { method: req.method ?? 'GET', path: url.pathname, query, contentType: req.headers['content-type'] };
    const send = (status: number, body: unknown) => {
      this.requests.push({ ...entry, status });
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    try {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const raw = Buffer.concat(chunks).toString('utf8');
      const hook = this.intercepts.findIndex((h) => h.method === req.method && url.pathname.endsWith(h.pathSuffix));
      if (hook >= 0) this.intercepts.splice(hook, 1)[0]?.fn();
      const m = /^\/(?:api\/v1|apis\/apps\/v1)\/namespaces\/([^/]+)\/(pods|services|deployments)(?:\/([^/]+))?(?:\/(scale))?$/.exec(url.pathname);
      if (!m) throw new StatusError(404, 'NotFound', `the server could not find the requested resource`);
      const [, namespace = '', resource, name, sub] = m as unknown as [string, string, Resource, string | undefined, string | undefined];
      if ((resource === 'deployments') !== url.pathname.startsWith('/apis/apps/v1/'))
        throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
      const verb =
        req.method === 'GET'
          ? name
            ? 'get'
            : query.watch === 'true' || query.watch === '1'
              ? 'watch'
              : 'list'
          : req.method === 'PATCH'
            ? 'patch'
            : req.method === 'PUT'
              ? 'update'
              : req.method === 'DELETE'
                ? 'delete'
                : req.method === 'POST'
                  ? 'create'
                  : 'unknown';
      const rbacResource = sub ? `${resource}/${sub}` : resource;
      if (this.forbidden.has(`${verb} ${rbacResource}`) || this.forbidden.has(`${verb} ${resource}`)) {
        const what = name ? `${qualified(resource)} "${name}"` : qualified(resource);
        throw new StatusError(
          403,
          'Forbidden',
          `${what} is forbidden: User "${this.user}" cannot ${verb} resource "${rbacResource}" in API group "${KIND[resource].group}" in the namespace "${namespace}"`,
          {
            ...(name ? { name } : {}),
            group: KIND[resource].group,
            kind: resource,
          },
        );
      }
      if (!this.namespaces.has(namespace))
        throw new StatusError(404, 'NotFound', `namespaces "${namespace}" not found`, { name: namespace, kind: 'namespaces' });
      if (verb === 'watch') return this.watch(req, res, resource, namespace, query, entry);
      if (verb === 'list') {
        const { kind, apiVersion } = KIND[resource];
        return send(200, {
          kind: `${kind}List`,
          apiVersion,
          metadata: { resourceVersion: String(this.rv) },
          items: this.list(resource, namespace, query.labelSelector),
        });
      }
      if (!name) throw new StatusError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
      const body = raw ? (JSON.parse(raw) as Obj) : undefined;
      if (sub === 'scale') return send(200, this.scale(req.method ?? 'GET', namespace, name, body, query));
      if (req.method === 'GET') {
        const o = this.get(resource, namespace, name);
        if (!o) throw this.notFound(resource, name);
        return send(200, o);
      }
      if (req.method === 'PATCH') return send(200, this.patch(resource, namespace, name, body, req.headers['content-type'], query));
      if (req.method === 'PUT') return send(200, this.replace(resource, namespace, name, body, query));
      if (req.method === 'DELETE') return send(200, this.delete(resource, namespace, name));
      throw new StatusError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
    } catch (err) {
      if (err instanceof StatusError) return send(err.code, this.status(err));
      if (err instanceof SyntaxError) return send(400, this.status(new StatusError(400, 'BadRequest', `error decoding body: ${err.message}`)));
      return send(500, this.status(new StatusError(500, 'InternalError', String(err))));
    }
  }

  private notFound(resource: Resource, name: string): StatusError {
    return new StatusError(404, 'NotFound', `${qualified(resource)} "${name}" not found`, { name, group: KIND[resource].group, kind: resource });
  }

  private watch(
    req: IncomingMessage,
    res: ServerResponse,
    resource: Resource,
    namespace: string,
    query: Record<string, string>,
    entry: Omit<RequestLogEntry, 'status'>,
  ): void {
    this.requests.push({ ...entry, status: 200 });
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    const from = query.resourceVersion ? Number(query.resourceVersion) : 0;
    const selector = query.labelSelector;
    const match = (o: Obj) => o.metadata.namespace === namespace && matchesSelector(o.metadata.labels, selector);
    if (from > 0 && from < this.oldestRv) {
      this.goneCount++;
      res.write(
        `${JSON.stringify({ type: 'ERROR', object: this.status(new StatusError(410, 'Expired', `too old resource version: ${from} (${this.oldestRv})`)) })}\n`,
      );
      res.end();
      return;
    }
    if (from === 0) {
      // No resourceVersion: the current state as ADDED events, then changes.
      for (const o of this.list(resource, namespace, selector)) res.write(`${JSON.stringify({ type: 'ADDED', object: o })}\n`);
    } else {
      for (const e of this.history)
        if (e.rv > from && e.resource === resource && match(e.obj)) res.write(`${JSON.stringify({ type: e.type, object: e.obj })}\n`);
    }
    const w: Watcher & { bookmarks?: boolean } = { resource, namespace, selector, res, bookmarks: query.allowWatchBookmarks === 'true' };
    this.watchers.add(w);
    req.socket.once('close', () => this.watchers.delete(w));
  }

  private authorizeQuota(resource: Resource, namespace: string, name: string): void {
    if (resource !== 'services' || this.serviceQuota === undefined) return;
    const used = this.list('services', namespace).length;
    if (used >= this.serviceQuota) {
      throw new StatusError(
        403,
        'Forbidden',
        `services "${name}" is forbidden: exceeded quota: object-counts, requested: services=1, used: services=${used}, limited: services=${this.serviceQuota}`,
        { name, kind: 'services' },
      );
    }
  }

  private validate(resource: Resource, obj: Obj): void {
    // Status is validated by its own subresource; writes here validate what a client sends.
    const { status: _status, ...rest } = obj;
    const model = resource === 'deployments' ? new Deployment(rest as never) : resource === 'services' ? new Service(rest as never) : new Pod(rest as never);
    try {
      model.validate();
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      throw new StatusError(422, 'Invalid', `${KIND[resource].kind} "${obj.metadata.name}" is invalid: ${message}`, {
        name: obj.metadata.name,
        group: KIND[resource].group,
        kind: KIND[resource].kind,
        causes: [{ reason: 'FieldValueInvalid', message }],
      });
    }
    if (resource === 'deployments') {
      const spec = obj.spec as
        { selector?: { matchLabels?: Record<string, string> }; template?: { metadata?: { labels?: Record<string, string> } } } | undefined;
      const sel = spec?.selector?.matchLabels ?? {};
      const labels = spec?.template?.metadata?.labels ?? {};
      if (Object.keys(sel).length === 0 || !Object.entries(sel).every(([k, v]) => labels[k] === v)) {
        throw new StatusError(
          422,
          'Invalid',
          `Deployment.apps "${obj.metadata.name}" is invalid: spec.template.metadata.labels: Invalid value: \`selector\` does not match template \`labels\``,
          {
            name: obj.metadata.name,
            group: 'apps',
            kind: 'Deployment',
            causes: [
              { reason: 'FieldValueInvalid', field: 'spec.template.metadata.labels', message: 'Invalid value: `selector` does not match template `labels`' },
            ],
          },
        );
      }
    }
  }

  /** What the API server fills in on create. */
  private defaults(resource: Resource, obj: Obj): void {
    obj.metadata.uid = randomUUID();
    obj.metadata.creationTimestamp = new Date().toISOString();
    if (resource === 'deployments') {
      const spec = obj.spec as Record<string, unknown>;
      if (spec.replicas === undefined) spec.replicas = 1;
      spec.revisionHistoryLimit ??= 10;
      spec.progressDeadlineSeconds ??= 600;
      obj.metadata.generation = 1;
      obj.status = { observedGeneration: 0 };
    }
    if (resource === 'services') {
      const spec = obj.spec as Record<string, unknown>;
      spec.clusterIP ??= `10.96.0.${this.clusterIp++}`;
      spec.sessionAffinity ??= 'None';
    }
  }

  private patch(
    resource: Resource,
    namespace: string,
    name: string,
    body: Obj | undefined,
    contentType: string | undefined,
    query: Record<string, string>,
  ): Obj {
    if (!body) throw new StatusError(400, 'BadRequest', 'the body of the request was in an unknown format');
    const key = this.key(resource, namespace, name);
    const old = this.store.get(key);
    const now = new Date().toISOString();
    const type = (contentType ?? '').split(';')[0]?.trim();
    if (type === 'application/apply-patch+yaml') {
      if (!query.fieldManager)
        throw new StatusError(422, 'Invalid', 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch');
      if (body.metadata?.name && body.metadata.name !== name)
        throw new StatusError(400, 'BadRequest', 'the name of the object does not match the name on the URL');
      if (body.kind !== KIND[resource].kind || body.apiVersion !== KIND[resource].apiVersion)
        throw new StatusError(
          400,
          'BadRequest',
          `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (${KIND[resource].apiVersion})`,
        );
      if (!old) this.authorizeQuota(resource, namespace, name);
      const config = structuredClone(body);
      config.metadata.namespace = namespace;
      const result = serverSideApply(old?.obj ?? null, old?.managers ?? [], config, query.fieldManager, query.force === 'true', now);
      if (result.conflicts.length > 0) {
        const list = result.conflicts.map((c) => `conflict with "${c.manager}": ${describePath(c.path)}`);
        throw new StatusError(
          409,
          'Conflict',
          `Apply failed with ${result.conflicts.length} conflict${result.conflicts.length === 1 ? '' : 's'}: ${list.join('\n')}`,
          {
            causes: result.conflicts.map((c) => ({ reason: 'FieldManagerConflict', message: `conflict with "${c.manager}"`, field: describePath(c.path) })),
          },
        );
      }
      const obj = result.object as Obj;
      if (!old) this.defaults(resource, obj);
      else if (resource === 'deployments' && JSON.stringify((obj.spec as Obj)?.template) !== JSON.stringify((old.obj.spec as Obj)?.template))
        obj.metadata.generation = Number(old.obj.metadata.generation ?? 1) + 1;
      this.validate(resource, obj);
      return this.commit(resource, key, obj, result.managers, old ? 'MODIFIED' : 'ADDED');
    }
    if (type === 'application/merge-patch+json' || type === 'application/strategic-merge-patch+json') {
      if (!old) throw this.notFound(resource, name);
      const next = mergePatch(structuredClone(old.obj), body) as Obj;
      this.validate(resource, next);
      return this.commit(
        resource,
        key,
        next,
        recordUpdate(old.obj, next, old.managers, query.fieldManager ?? 'unknown', KIND[resource].apiVersion, now),
        'MODIFIED',
      );
    }
    throw new StatusError(
      415,
      'UnsupportedMediaType',
      `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`,
    );
  }

  private replace(resource: Resource, namespace: string, name: string, body: Obj | undefined, query: Record<string, string>): Obj {
    if (!body) throw new StatusError(400, 'BadRequest', 'the body of the request was in an unknown format');
    const key = this.key(resource, namespace, name);
    const old = this.store.get(key);
    if (!old) throw this.notFound(resource, name);
    const given = body.metadata?.resourceVersion;
    if (given === undefined || given === '')
      throw new StatusError(
        422,
        'Invalid',
        `${KIND[resource].kind} "${name}" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update`,
      );
    if (String(given) !== old.obj.metadata.resourceVersion) throw this.stale(resource, name);
    const next = structuredClone(body);
    next.metadata = { ...next.metadata, namespace, uid: old.obj.metadata.uid, creationTimestamp: old.obj.metadata.creationTimestamp };
    next.status = old.obj.status;
    this.validate(resource, next);
    return this.commit(
      resource,
      key,
      next,
      recordUpdate(old.obj, next, old.managers, query.fieldManager ?? 'unknown', KIND[resource].apiVersion, new Date().toISOString()),
      'MODIFIED',
    );
  }

  private stale(resource: Resource, name: string): StatusError {
    return new StatusError(
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${qualified(resource)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      { name, group: KIND[resource].group, kind: resource },
    );
  }

  /** The scale subresource of a Deployment (autoscaling/v1 Scale). */
  private scale(method: string, namespace: string, name: string, body: Obj | undefined, query: Record<string, string>): Record<string, unknown> {
    const key = this.key('deployments', namespace, name);
    const old = this.store.get(key);
    if (!old) throw this.notFound('deployments', name);
    const asScale = (o: Obj) => {
      const spec = o.spec as { replicas?: number; selector?: { matchLabels?: Record<string, string> } };
      const status = o.status as { replicas?: number } | undefined;
      return {
        kind: 'Scale',
        apiVersion: 'autoscaling/v1',
        metadata: { name, namespace, uid: o.metadata.uid, resourceVersion: o.metadata.resourceVersion, creationTimestamp: o.metadata.creationTimestamp },
        spec: { replicas: spec.replicas ?? 0 },
        status: {
          replicas: status?.replicas ?? 0,
          selector: Object.entries(spec.selector?.matchLabels ?? {})
            .map(([k, v]) => `${k}=${v}`)
            .join(','),
        },
      };
    };
    if (method === 'GET') return asScale(this.view(old));
    if (!body) throw new StatusError(400, 'BadRequest', 'the body of the request was in an unknown format');
    if (method === 'PUT') {
      const given = body.metadata?.resourceVersion;
      if (given !== undefined && given !== '' && String(given) !== old.obj.metadata.resourceVersion) throw this.stale('deployments', name);
    } else if (method !== 'PATCH') throw new StatusError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
    const replicas = (body.spec as { replicas?: unknown } | undefined)?.replicas;
    if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0) {
      throw new StatusError(
        422,
        'Invalid',
        `Scale.autoscaling "${name}" is invalid: spec.replicas: Invalid value: ${JSON.stringify(replicas)}: must be greater than or equal to 0`,
        { name, group: 'autoscaling', kind: 'Scale', causes: [{ reason: 'FieldValueInvalid', field: 'spec.replicas' }] },
      );
    }
    const next = structuredClone(old.obj);
    (next.spec as Record<string, unknown>).replicas = replicas;
    const view = this.commit(
      'deployments',
      key,
      next,
      recordUpdate(old.obj, next, old.managers, query.fieldManager ?? 'unknown', 'apps/v1', new Date().toISOString(), 'scale'),
      'MODIFIED',
    );
    return asScale(view);
  }

  private delete(resource: Resource, namespace: string, name: string): Record<string, unknown> {
    const key = this.key(resource, namespace, name);
    const old = this.store.get(key);
    if (!old) throw this.notFound(resource, name);
    if (resource === 'pods') {
      // Graceful: the kubelet finishes the pod (preStop, SIGTERM) and then it disappears.
      if (!old.obj.metadata.deletionTimestamp) {
        const next = structuredClone(old.obj);
        next.metadata.deletionTimestamp = new Date().toISOString();
        next.metadata.deletionGracePeriodSeconds = (next.spec as { terminationGracePeriodSeconds?: number }).terminationGracePeriodSeconds ?? 30;
        return this.commit(resource, key, next, old.managers, 'MODIFIED');
      }
      return this.view(old);
    }
    this.remove(resource, namespace, name);
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Success',
      details: { name, group: KIND[resource].group, kind: resource, uid: old.obj.metadata.uid },
    };
  }
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const base = typeof target === 'object' && target !== null && !Array.isArray(target) ? (target as Record<string, unknown>) : {};
  const out = new Map(Object.entries(base));
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) out.delete(k);
    else out.set(k, mergePatch(out.get(k), v));
  }
  return Object.fromEntries(out);
}
