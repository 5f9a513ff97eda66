// The fake kube-apiserver keeps Kubernetes' semantics where the provisioner relies on them; these
// tests pin those semantics down with raw HTTP, the way kubectl and client libraries see them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeContainer, startFakeCluster, until, type FakeCluster, type Tree } from './fake-cluster.ts';

const NS = 'team';
const deployment = (name: string, image: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name, labels: { app: name } },
  spec: {
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'main', image, ...extra }] } },
  },
});

describe('fake kube-apiserver semantics', () => {
  let c: FakeCluster;
  const call = async (method: string, path: string, body?: unknown, contentType = 'application/json') => {
    const res = await fetch(`${c.url}${path}`, { method, headers: body ? { 'content-type': contentType } : {}, body: body ? JSON.stringify(body) : undefined });
    return { status: res.status, body: (await res.json()) as Tree };
  };
  /**
   * GET, change, PUT, as a client does it: the simulated controllers may write the object between the two (a 409 for
   * the PUT), and then the client reads again. The read that the write succeeded on, and the write.
   */
  const readModifyWrite = async (path: string, change: (x: Tree) => Tree, query = '') => {
    for (let attempt = 1; ; attempt++) {
      const read = (await call('GET', path)).body;
      const wrote = await call('PUT', `${path}${query}`, change(read));
      if (wrote.status !== 409 || attempt === 20) return { read, wrote };
    }
  };
  const apply = (name: string, body: unknown, manager: string, force = false) =>
    call(
      'PATCH',
      `/apis/apps/v1/namespaces/${NS}/deployments/${name}?fieldManager=${manager}${force ? '&force=true' : ''}`,
      body,
      'application/apply-patch+yaml',
    );

  beforeAll(async () => {
    c = await startFakeCluster({ namespaces: [NS], bookmarkMs: 30 });
  });
  afterAll(async () => c?.close());

  it('server-side apply: ownership per manager, 409 conflicts naming the field, force takes over, dropped fields are removed', async () => {
    const created = await apply('web', deployment('web', 'nginx:1', { args: ['--a'] }), 'alice');
    expect(created.status).toBe(200);
    expect(created.body.spec.replicas).toBe(1); // defaulted on create, owned by nobody
    expect(created.body.metadata.managedFields).toEqual([expect.objectContaining({ manager: 'alice', operation: 'Apply', fieldsType: 'FieldsV1' })]);

    // Same value: shared ownership, no conflict.
    expect((await apply('web', deployment('web', 'nginx:1'), 'bob')).status).toBe(200);
    // Different value on a field alice owns: conflict, nothing changes.
    const conflict = await apply('web', deployment('web', 'nginx:2'), 'carol');
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'Conflict', code: 409 });
    expect(conflict.body.message).toContain('conflict with "alice"');
    expect(conflict.body.details.causes).toContainEqual({
      reason: 'FieldManagerConflict',
      message: 'conflict with "alice"',
      field: '.spec.template.spec.containers[name="main"].image',
    });
    expect(c.api.get('deployments', NS, 'web')?.spec).toMatchObject({ template: { spec: { containers: [{ image: 'nginx:1' }] } } });
    // Forced: carol now owns the image; alice and bob lose it.
    expect((await apply('web', deployment('web', 'nginx:2'), 'carol', true)).status).toBe(200);
    const imagePath = 'f:spec/f:template/f:spec/f:containers/k:{"name":"main"}/f:image';
    const owners = () =>
      c.api
        .managedFields('deployments', NS, 'web')
        .filter((m) => m.paths.has(imagePath))
        .map((m) => m.manager);
    expect(owners()).toEqual(['carol']);
    // alice stops sending args: removed, since no one else owns them.
    expect((await apply('web', deployment('web', 'nginx:2'), 'alice', true)).status).toBe(200);
    expect(runtimeContainer(c.api.get('deployments', NS, 'web')).args).toBeUndefined();
    // A field manager is required for apply.
    expect((await call('PATCH', `/apis/apps/v1/namespaces/${NS}/deployments/web`, deployment('web', 'x'), 'application/apply-patch+yaml')).status).toBe(422);
  });

  it('resourceVersion: a stale update is 409, an update without one is 422, every write bumps it', async () => {
    const path = `/apis/apps/v1/namespaces/${NS}/deployments/web`;
    const { read: d, wrote: ok } = await readModifyWrite(path, (x) => ({ ...x, metadata: { ...x.metadata, labels: { app: 'web', tier: 'x' } } }));
    const rv = Number(d.metadata.resourceVersion);
    expect(ok.status).toBe(200);
    expect(Number(ok.body.metadata.resourceVersion)).toBeGreaterThan(rv);
    const stale = await call('PUT', `/apis/apps/v1/namespaces/${NS}/deployments/web`, d);
    expect(stale.status).toBe(409);
    expect(stale.body.message).toMatch(/the object has been modified; please apply your changes to the latest version and try again/);
    const noRv = await call('PUT', `/apis/apps/v1/namespaces/${NS}/deployments/web`, { ...d, metadata: { ...d.metadata, resourceVersion: undefined } });
    expect(noRv.status).toBe(422);
    // Scale subresource: the same rule, and it records a `scale` manager for spec.replicas.
    const { read: scale, wrote: scaled } = await readModifyWrite(`${path}/scale`, (x) => ({ ...x, spec: { replicas: 3 } }), '?fieldManager=hpa');
    expect(scale).toMatchObject({ kind: 'Scale', apiVersion: 'autoscaling/v1', spec: { replicas: 1 }, status: { selector: 'app=web' } });
    expect(scaled.status).toBe(200);
    expect((await call('PUT', `/apis/apps/v1/namespaces/${NS}/deployments/web/scale`, { ...scale, spec: { replicas: 4 } })).status).toBe(409);
    expect(c.api.managedFields('deployments', NS, 'web').find((m) => m.subresource === 'scale')).toMatchObject({
      manager: 'hpa',
      paths: new Set(['f:spec/f:replicas']),
    });
    const bad = await call('PATCH', `/apis/apps/v1/namespaces/${NS}/deployments/web/scale`, { spec: { replicas: -1 } }, 'application/merge-patch+json');
    expect(bad.status).toBe(422);
    // The simulated controllers follow: three pods, ready.
    await until(
      () =>
        c.api
          .list('pods', NS, 'app=web')
          .filter((p) => (p.status as { conditions?: { type: string; status: string }[] }).conditions?.some((x) => x.type === 'Ready' && x.status === 'True'))
          .length === 3,
    );
  });

  it('answers errors with Status bodies: 403 (RBAC), 404 (object, namespace), 422 (schema), 415 (patch type)', async () => {
    c.api.forbid('delete', 'deployments');
    const forbidden = await call('DELETE', `/apis/apps/v1/namespaces/${NS}/deployments/web`);
    expect(forbidden).toMatchObject({
      status: 403,
      body: { kind: 'Status', reason: 'Forbidden', code: 403, details: { name: 'web', group: 'apps', kind: 'deployments' } },
    });
    expect(forbidden.body.message).toBe(
      'deployments.apps "web" is forbidden: User "system:serviceaccount:infer:control-plane" cannot delete resource "deployments" in API group "apps" in the namespace "team"',
    );
    c.api.allow('delete', 'deployments');
    expect(await call('GET', `/apis/apps/v1/namespaces/${NS}/deployments/nope`)).toMatchObject({
      status: 404,
      body: { reason: 'NotFound', message: 'deployments.apps "nope" not found' },
    });
    expect(await call('GET', `/api/v1/namespaces/ghost/pods`)).toMatchObject({ status: 404, body: { message: 'namespaces "ghost" not found' } });
    const invalid = await apply(
      'bad',
      {
        ...deployment('bad', 'x'),
        spec: {
          selector: { matchLabels: { app: 'bad' } },
          template: { metadata: { labels: { app: 'bad' } }, spec: { containers: [{ name: 'c', image: 'x', ports: [{ containerPort: 'eighty' }] }] } },
        },
      },
      'alice',
    );
    expect(invalid).toMatchObject({ status: 422, body: { kind: 'Status', reason: 'Invalid', code: 422 } });
    const mismatch = await apply(
      'bad',
      {
        ...deployment('bad', 'x'),
        spec: {
          selector: { matchLabels: { app: 'other' } },
          template: { metadata: { labels: { app: 'bad' } }, spec: { containers: [{ name: 'c', image: 'x' }] } },
        },
      },
      'alice',
    );
    expect(mismatch.status).toBe(422);
    expect(mismatch.body.message).toContain('`selector` does not match template `labels`');
    expect((await call('PATCH', `/apis/apps/v1/namespaces/${NS}/deployments/web`, { spec: {} }, 'application/json-patch+json')).status).toBe(415);
  });

  it('watch: replays from a resourceVersion, sends bookmarks when asked, and 410 Gone for a compacted one', async () => {
    const list = (await call('GET', `/api/v1/namespaces/${NS}/pods?labelSelector=app%3Dweb`)).body;
    expect(list.kind).toBe('PodList');
    const rv = list.metadata.resourceVersion as string;
    const ac = new AbortController();
    const res = await fetch(`${c.url}/api/v1/namespaces/${NS}/pods?watch=true&resourceVersion=${rv}&allowWatchBookmarks=true&labelSelector=app%3Dweb`, {
      signal: ac.signal,
    });
    const reader = res.body!.getReader();
    const events: { type: string; object: Tree }[] = [];
    let buf = '';
    const pump = (async () => {
      for (;;) {
        const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
        if (done) return;
        buf += new TextDecoder().decode(value);
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          events.push(JSON.parse(buf.slice(0, i)));
          buf = buf.slice(i + 1);
        }
      }
    })();
    await call('PATCH', `/apis/apps/v1/namespaces/${NS}/deployments/web/scale`, { spec: { replicas: 1 } }, 'application/merge-patch+json');
    await until(() => events.some((e) => e.type === 'DELETED') && events.some((e) => e.type === 'BOOKMARK'));
    const bookmark = events.find((e) => e.type === 'BOOKMARK');
    expect(bookmark?.object).toMatchObject({ kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: expect.any(String) } });
    // Terminating pods first show a deletionTimestamp (MODIFIED), then go (DELETED).
    expect(events.find((e) => e.type === 'MODIFIED' && e.object.metadata.deletionTimestamp)).toBeDefined();
    ac.abort();
    await pump;

    c.api.put('services', { apiVersion: 'v1', kind: 'Service', metadata: { name: 'bump', namespace: NS }, spec: { ports: [{ port: 1 }] } });
    c.api.compact();
    const gone = await fetch(`${c.url}/api/v1/namespaces/${NS}/pods?watch=true&resourceVersion=${rv}`);
    expect(gone.status).toBe(200);
    const text = await gone.text();
    expect(JSON.parse(text.trim())).toMatchObject({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired' } });
  });
});
