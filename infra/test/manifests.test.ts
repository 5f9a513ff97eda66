// Every manifest under infra/kubernetes, rendered as Kustomize would, validated against the official
// Kubernetes OpenAPI schemas (kubernetes-models); the RBAC checked against what the Kubernetes
// provisioner really calls; env names, probes, ports and secrets checked against the apps; and the
// compose stack's wiring (infra/compose.yaml, infra/nginx, infra/docker) checked the same way.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { adminEnvSchema } from '../../apps/admin-api/src/env.ts';
import { dataplaneEnvSchema } from '../../apps/dataplane/src/env.ts';

const INFRA = fileURLToPath(new URL('..', import.meta.url));
const REPO = resolve(INFRA, '..');
const KUBERNETES = join(INFRA, 'kubernetes');
const PROVISIONER = join(REPO, 'apps/admin-api/src/modules/deployments/provisioners/kubernetes');

type Obj = Record<string, unknown>;
interface Manifest extends Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
}

const walk = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
const yamlFiles = (dir: string): string[] => walk(dir).filter((p) => /\.ya?ml$/.test(p));

function loadDocs(file: string): Obj[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${relative(REPO, file)}: ${doc.errors.map((e) => e.message).join('; ')}`);
      return doc.toJS() as Obj;
    })
    .filter((d) => d !== null);
}

const KUSTOMIZE_KEYS = new Set(['apiVersion', 'kind', 'resources', 'images']);

/** Renders a kustomization the way `kustomize build` does for the features used here (resources, images); refuses any other. */
function render(kustomizationFile: string): { manifests: Manifest[]; files: string[] } {
  const k = loadDocs(kustomizationFile)[0]!;
  const unknown = Object.keys(k).filter((key) => !KUSTOMIZE_KEYS.has(key));
  if (unknown.length > 0) throw new Error(`${relative(REPO, kustomizationFile)} uses ${unknown.join(', ')}, which this renderer does not implement`);
  const base = dirname(kustomizationFile);
  const manifests: Manifest[] = [];
  const files: string[] = [kustomizationFile];
  for (const entry of (k['resources'] as string[] | undefined) ?? []) {
    const path = resolve(base, entry);
    if (!existsSync(path)) throw new Error(`${relative(REPO, kustomizationFile)}: resource ${entry} does not exist`);
    if (statSync(path).isDirectory()) {
      const sub = render(join(path, 'kustomization.yaml'));
      manifests.push(...sub.manifests);
      files.push(...sub.files);
    } else {
      manifests.push(...(loadDocs(path) as Manifest[]));
      files.push(path);
    }
  }
  const images = (k['images'] as { name: string; newName?: string; newTag?: string }[] | undefined) ?? [];
  for (const m of manifests) {
    for (const c of containersOf(m)) {
      const rule = images.find((i) => c['image'] === i.name || String(c['image']).startsWith(`${i.name}:`));
      if (rule) c['image'] = `${rule.newName ?? rule.name}:${rule.newTag ?? 'latest'}`;
    }
  }
  return { manifests, files };
}

function podSpec(m: Manifest): Obj | undefined {
  const spec = m['spec'] as Obj | undefined;
  return ((spec?.['template'] as Obj | undefined)?.['spec'] as Obj | undefined) ?? undefined;
}
function containersOf(m: Manifest): Obj[] {
  return (podSpec(m)?.['containers'] as Obj[] | undefined) ?? [];
}
function envOf(container: Obj): { name: string; value?: string; valueFrom?: Obj }[] {
  return (container['env'] as { name: string; value?: string; valueFrom?: Obj }[] | undefined) ?? [];
}

/** The kubernetes-models class for a manifest's apiVersion and kind (core group: `kubernetes-models/v1/Kind`). */
async function modelFor(apiVersion: string, kind: string): Promise<new (data: Obj) => { validate(): void }> {
  const mod = (await import(/* @vite-ignore */ `kubernetes-models/${apiVersion}/${kind}`)) as Record<string, new (data: Obj) => { validate(): void }>;
  const model = mod[kind];
  if (!model) throw new Error(`kubernetes-models has no ${apiVersion} ${kind}`);
  return model;
}

const kustomizations = walk(KUBERNETES).filter((p) => /(^|\/)kustomization\.ya?ml$/.test(p));
const rendered = kustomizations.map((file) => ({ file, ...render(file) }));
const all = rendered.flatMap((r) => r.manifests);
const find = (kind: string, name: string): Manifest => {
  const m = all.find((x) => x.kind === kind && x.metadata.name === name);
  if (!m) throw new Error(`no ${kind} ${name} in infra/kubernetes`);
  return m;
};

describe('infra/kubernetes', () => {
  it('has a kustomization whose every resource exists, and no YAML file outside one', () => {
    expect(kustomizations.length).toBeGreaterThan(0);
    const referenced = new Set(rendered.flatMap((r) => r.files));
    const orphans = yamlFiles(KUBERNETES).filter((f) => !referenced.has(f));
    expect(orphans.map((f) => relative(REPO, f))).toEqual([]);
  });

  it('validates every rendered manifest against the Kubernetes OpenAPI schemas', async () => {
    const kinds = new Set<string>();
    for (const m of all) {
      const Model = await modelFor(m.apiVersion, m.kind);
      expect(() => new Model(m).validate(), `${m.kind} ${m.metadata.name}`).not.toThrow();
      kinds.add(m.kind);
    }
    expect([...kinds].sort()).toEqual(
      ['ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'Namespace', 'PodDisruptionBudget', 'Role', 'RoleBinding', 'Service', 'ServiceAccount'].sort(),
    );
  });

  it('the schema check is real: a broken Deployment is refused', async () => {
    const Model = await modelFor('apps/v1', 'Deployment');
    const broken = structuredClone(find('Deployment', 'infer-data-plane')) as Obj;
    (broken['spec'] as Obj)['replicas'] = 'two';
    delete (broken['spec'] as Obj)['selector'];
    expect(() => new Model(broken).validate()).toThrow(/replicas must be integer|selector/);
  });

  it('grants the provisioner exactly the Kubernetes API calls its source makes, in the runtimes namespace only', () => {
    expect(all.filter((m) => m.kind === 'ClusterRole' || m.kind === 'ClusterRoleBinding')).toEqual([]);
    const roles = all.filter((m) => m.kind === 'Role');
    expect(roles).toHaveLength(1);
    const role = roles[0]!;
    const config = find('ConfigMap', 'infer-config');
    const runtimeNamespace = (config['data'] as Record<string, string>)['K8S_NAMESPACE'];
    expect(role.metadata.namespace).toBe(runtimeNamespace);
    expect(runtimeNamespace).not.toBe(find('Deployment', 'infer-control-plane').metadata.namespace);

    const granted = new Set<string>();
    for (const rule of role['rules'] as { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] }[]) {
      for (const g of rule.apiGroups) for (const r of rule.resources) for (const v of rule.verbs) granted.add(`${g}/${r}:${v}`);
    }
    expect([...granted].filter((p) => p.includes('*'))).toEqual([]);
    expect([...granted].sort()).toEqual([...providerCalls()].sort());

    const binding = find('RoleBinding', role.metadata.name);
    expect(binding.metadata.namespace).toBe(runtimeNamespace);
    expect(binding['roleRef']).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata.name });
    const cp = find('Deployment', 'infer-control-plane');
    expect(binding['subjects']).toEqual([{ kind: 'ServiceAccount', name: podSpec(cp)!['serviceAccountName'], namespace: cp.metadata.namespace }]);
    // The data plane calls no Kubernetes API and gets no token.
    expect(podSpec(find('Deployment', 'infer-data-plane'))!['automountServiceAccountToken']).toBe(false);
  });

  it('sets only variables the apps read, and every secret by reference to the operator-created Secret', () => {
    const schemas: Record<string, Readonly<Record<string, unknown>>> = {
      'infer-control-plane': adminEnvSchema.shape,
      'infer-data-plane': dataplaneEnvSchema.shape,
    };
    const secretNames = /TOKEN|PASSWORD|SECRET|KEY$|DATABASE_URL|REDIS_URL/;
    expect(all.filter((m) => m.kind === 'Secret')).toEqual([]);
    for (const [name, shape] of Object.entries(schemas)) {
      const d = find('Deployment', name);
      for (const c of containersOf(d)) {
        for (const e of envOf(c)) {
          expect(shape, `${name} sets ${e.name}`).toHaveProperty(e.name);
          if (secretNames.test(e.name)) {
            expect(e.value, `${name}: ${e.name} must come from a Secret`).toBeUndefined();
            expect((e.valueFrom?.['secretKeyRef'] as Obj | undefined)?.['name'], `${name}: ${e.name}`).toBe('infer-secrets');
          }
        }
        for (const from of (c['envFrom'] as { configMapRef?: { name: string } }[] | undefined) ?? []) {
          const cm = find('ConfigMap', from.configMapRef!.name);
          for (const key of Object.keys(cm['data'] as Obj)) {
            expect(shape, `${name} gets ${key} from ${cm.metadata.name}`).toHaveProperty(key);
            expect(key).not.toMatch(secretNames);
          }
        }
      }
    }
  });

  it('probes the health routes, runs as non-root, scrapes the right ports, and wires Services, PDBs and the HPA to the Deployments', () => {
    const expectProbe = (c: Obj, probe: string, path: string, port: number): void => {
      const httpGet = (c[probe] as Obj | undefined)?.['httpGet'] as { path: string; port: string | number } | undefined;
      expect(httpGet?.path, `${String(c['name'])} ${probe}`).toBe(path);
      const named = (c['ports'] as { name: string; containerPort: number }[]).find((p) => p.name === httpGet?.port);
      expect(named?.containerPort ?? httpGet?.port).toBe(port);
    };
    const cp = find('Deployment', 'infer-control-plane');
    const dp = find('Deployment', 'infer-data-plane');
    const cpc = containersOf(cp)[0]!;
    const dpc = containersOf(dp)[0]!;
    expectProbe(cpc, 'readinessProbe', '/readyz', 4000);
    expectProbe(cpc, 'livenessProbe', '/healthz', 4000);
    expectProbe(dpc, 'readinessProbe', '/readyz', 8080);
    expectProbe(dpc, 'livenessProbe', '/healthz', 8080);
    const envValue = (c: Obj, n: string): string | undefined => envOf(c).find((e) => e.name === n)?.value;
    expect(envValue(cpc, 'ADMIN_PORT')).toBe('4000');
    expect(envValue(dpc, 'PORT')).toBe('8080');

    // The data plane's metrics listen on their own internal port; the annotation must name it.
    const dpAnn = (dp['spec'] as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata.annotations;
    expect(dpAnn['prometheus.io/scrape']).toBe('true');
    expect(dpAnn['prometheus.io/port']).toBe(envValue(dpc, 'METRICS_PORT'));
    expect(envValue(dpc, 'METRICS_HOST')).toBe('0.0.0.0');
    expect(dpAnn['prometheus.io/path']).toBe('/metrics');
    const cpAnn = (cp['spec'] as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata.annotations;
    expect(cpAnn['prometheus.io/port']).toBe(envValue(cpc, 'ADMIN_PORT'));

    for (const d of [cp, dp]) {
      const sc = podSpec(d)!['securityContext'] as Obj;
      expect(sc['runAsNonRoot']).toBe(true);
      expect(sc['runAsUser']).not.toBe(0);
      for (const c of containersOf(d)) expect((c['securityContext'] as Obj)['allowPrivilegeEscalation']).toBe(false);
      const labels = (d['spec'] as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;
      const selects = (m: Manifest, sel: Record<string, string>): void => {
        for (const [k, v] of Object.entries(sel)) expect(labels[k], `${m.kind} ${m.metadata.name} selects ${k}=${v}`).toBe(v);
      };
      const svc = find('Service', d.metadata.name);
      selects(svc, (svc['spec'] as { selector: Record<string, string> }).selector);
      for (const p of (svc['spec'] as { ports: { targetPort: string }[] }).ports) {
        expect((containersOf(d)[0]!['ports'] as { name: string }[]).map((x) => x.name)).toContain(p.targetPort);
      }
      const pdb = find('PodDisruptionBudget', d.metadata.name);
      selects(pdb, ((pdb['spec'] as Obj)['selector'] as { matchLabels: Record<string, string> }).matchLabels);
      expect(svc.metadata.namespace).toBe(d.metadata.namespace);
      expect(pdb.metadata.namespace).toBe(d.metadata.namespace);
    }
    // CONTROL_PLANE_URL names the control plane's Service.
    const cpSvc = find('Service', 'infer-control-plane');
    expect(envValue(dpc, 'CONTROL_PLANE_URL')).toBe(`http://${cpSvc.metadata.name}.${cpSvc.metadata.namespace}.svc`);

    const hpa = find('HorizontalPodAutoscaler', 'infer-data-plane');
    expect((hpa['spec'] as Obj)['scaleTargetRef']).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: dp.metadata.name });
    expect((hpa['spec'] as { metrics: { resource: { name: string } }[] }).metrics[0]!.resource.name).toBe('cpu');
    // Utilisation is a share of the request: without one the HPA cannot work.
    expect(((dpc['resources'] as Obj)['requests'] as Obj)['cpu']).toBeTruthy();
  });
});

/**
 * (apiGroup/resource:verb) for every Kubernetes API call in the provisioner's source: client methods
 * (`apps.patchNamespacedDeployment` -> apps/deployments:patch) and informer paths (ListWatch -> watch).
 */
function providerCalls(): Set<string> {
  const source = readdirSync(PROVISIONER)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .map((f) => readFileSync(join(PROVISIONER, f), 'utf8'))
    .join('\n');
  const verbs: Record<string, string> = {
    read: 'get',
    list: 'list',
    patch: 'patch',
    delete: 'delete',
    create: 'create',
    replace: 'update',
    deleteCollection: 'deletecollection',
  };
  const kinds: Record<string, string> = {
    Deployment: 'apps/deployments',
    Pod: '/pods',
    Service: '/services',
    EndpointSlice: 'discovery.k8s.io/endpointslices',
    Event: '/events',
    ConfigMap: '/configmaps',
    Secret: '/secrets',
  };
  const calls = new Set<string>();
  for (const m of source.matchAll(/\b\w+\.(read|list|patch|deleteCollection|delete|create|replace)Namespaced([A-Z][A-Za-z]*?)(Scale|Status)?\(/g)) {
    const resource = kinds[m[2]!];
    if (!resource) throw new Error(`the provisioner calls ${m[0]}: add ${m[2]} to this test's kinds`);
    calls.add(`${resource}${m[3] ? `/${m[3].toLowerCase()}` : ''}:${verbs[m[1]!]}`);
  }
  for (const m of source.matchAll(/`\/apis?\/(?:([a-z0-9.-]+)\/)?v1\/namespaces\/\$\{\w+\}\/([a-z]+)`/g)) {
    calls.add(`${m[1] ?? ''}/${m[2]}:watch`);
  }
  if (calls.size === 0) throw new Error('found no Kubernetes API call in the provisioner source');
  return calls;
}

describe('infra/compose.yaml', () => {
  const compose = parseYaml(readFileSync(join(INFRA, 'compose.yaml'), 'utf8'), { merge: true }) as { services: Record<string, Obj> };
  const services = compose.services;
  const env = (s: string): Record<string, string> => (services[s]!['environment'] as Record<string, string>) ?? {};
  const ofTarget = (t: string): string[] => Object.keys(services).filter((s) => (services[s]!['build'] as Obj | undefined)?.['target'] === t);
  const dockerfile = readFileSync(join(INFRA, 'docker/Dockerfile'), 'utf8');

  it('runs PostgreSQL, Redis, two control planes, two data-plane nodes behind nginx and simulated runtimes', () => {
    expect(services).toHaveProperty('postgres');
    expect(services).toHaveProperty('redis');
    expect(services).toHaveProperty('nginx');
    expect(ofTarget('control-plane')).toHaveLength(2);
    expect(ofTarget('data-plane')).toHaveLength(2);
    expect(ofTarget('runtime-sim').length).toBeGreaterThanOrEqual(1);
    // Only nginx is published.
    expect(Object.keys(services).filter((s) => services[s]!['ports'])).toEqual(['nginx']);
  });

  it('wires the environment: database, node token, Redis, control plane through nginx, public URLs; only names the apps read', () => {
    const admin = adminEnvSchema.shape as Readonly<Record<string, unknown>>;
    const node = dataplaneEnvSchema.shape as Readonly<Record<string, unknown>>;
    for (const s of ofTarget('control-plane')) {
      for (const k of Object.keys(env(s))) expect(admin, `${s} sets ${k}`).toHaveProperty(k);
      expect(env(s)['DATABASE_URL']).toMatch(/^postgres:\/\/infer:\$\{POSTGRES_PASSWORD[^}]*\}@postgres:5432\/infer$/);
      expect(env(s)['NODE_TOKEN']).toMatch(/^\$\{NODE_TOKEN/);
      expect(env(s)['SECRETS_ENCRYPTION_KEY']).toMatch(/^\$\{SECRETS_ENCRYPTION_KEY/);
      expect(env(s)['DATAPLANE_URL']).toBeTruthy();
    }
    const nodeIds = new Set<string>();
    for (const s of ofTarget('data-plane')) {
      for (const k of Object.keys(env(s))) expect(node, `${s} sets ${k}`).toHaveProperty(k);
      expect(env(s)['CONTROL_PLANE_URL']).toBe('http://nginx:4000');
      expect(env(s)['NODE_TOKEN']).toBe(env(ofTarget('control-plane')[0]!)['NODE_TOKEN']);
      expect(env(s)['REDIS_URL']).toBe('redis://redis:6379');
      nodeIds.add(env(s)['NODE_ID']!);
    }
    expect(nodeIds.size).toBe(ofTarget('data-plane').length);
    // Every ${VAR} the file reads is in .env.example.
    const example = readFileSync(join(INFRA, '.env.example'), 'utf8');
    const used = new Set([...readFileSync(join(INFRA, 'compose.yaml'), 'utf8').matchAll(/\$\{([A-Z_]+)/g)].map((m) => m[1]!));
    for (const v of used) expect(example, `.env.example lacks ${v}`).toMatch(new RegExp(`^${v}=`, 'm'));
  });

  it('builds targets the Dockerfile has, each a non-root image with a health check on the app’s health route', () => {
    const stage = (name: string): string => {
      const start = dockerfile.search(new RegExp(`^FROM \\S+ AS ${name}$`, 'm'));
      expect(start, `Dockerfile stage ${name}`).toBeGreaterThanOrEqual(0);
      const rest = dockerfile.slice(start + 1);
      const next = rest.search(/^FROM /m);
      return next < 0 ? rest : rest.slice(0, next);
    };
    const health: Record<string, string> = { 'control-plane': '/readyz', 'data-plane': '/readyz', 'runtime-sim': '/health' };
    for (const [target, path] of Object.entries(health)) {
      const text = stage(target);
      expect(text).toMatch(/^USER node$/m);
      expect(text).toMatch(new RegExp(`^HEALTHCHECK [^\\n]*\\\\\\n\\s+CMD .*${path}`, 'm'));
    }
    // The images run the Node the repository asks for (its `node` devDependency's major).
    const major = /\d+/.exec(
      (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }).devDependencies['node']!,
    )![0];
    expect(dockerfile).toMatch(new RegExp(`^ARG NODE_IMAGE=node:${major}-`, 'm'));
  });

  it('nginx balances over exactly the compose services it fronts', () => {
    const conf = readFileSync(join(INFRA, 'nginx/nginx.conf'), 'utf8');
    const upstream = (name: string): string[] => {
      const body = new RegExp(`upstream ${name} \\{([^}]*)\\}`).exec(conf)?.[1] ?? '';
      return [...body.matchAll(/server ([a-z0-9-]+):(\d+)/g)].map((m) => `${m[1]}:${m[2]}`);
    };
    expect(upstream('data_plane').sort()).toEqual(
      ofTarget('data-plane')
        .map((s) => `${s}:8080`)
        .sort(),
    );
    expect(upstream('control_plane').sort()).toEqual(
      ofTarget('control-plane')
        .map((s) => `${s}:4000`)
        .sort(),
    );
  });
});
