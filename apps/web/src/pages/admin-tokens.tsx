import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { api, type AdminToken, type CreatedAdminToken } from '../api.tsx';
import { ConfirmDialog } from '../components/confirm.tsx';
import { CopyButton } from '../components/copy-button.tsx';
import { CredentialCells, CredentialHeads } from '../components/credential-cells.tsx';
import { Empty, ErrorBox, QueryView } from '../components/states.tsx';
import { useSession } from '../session.tsx';
import { DataTable } from '../components/data-table.tsx';
import { localDay } from '../lib/format.ts';
import { useSingleFlight } from '../lib/single-flight.ts';

type Scope = 'tenant' | 'platform';
type View = 'tenant' | 'all';

/** A one-line curl that asks GraphQL who the token is. */
export function graphqlCurl(origin: string, secret: string): string {
  const body = JSON.stringify({ query: '{ viewer { kind isPlatformAdmin tenants { slug name } } }' });
  return `curl -s ${origin}/graphql -H "Authorization: Bearer ${secret}" -H "Content-Type: application/json" -d '${body}'`;
}

function CreateTokenForm(props: {
  tenant: { id: string; name: string } | null;
  canTenant: boolean;
  canPlatform: boolean;
  onCreated(t: CreatedAdminToken): void;
}) {
  const id = useId();
  const qc = useQueryClient();
  const [name, setName] = useState('');
  const [expiry, setExpiry] = useState('');
  const [scope, setScope] = useState<Scope>(props.canTenant ? 'tenant' : 'platform');
  const tenantScope = scope === 'tenant' && props.canTenant;
  const create = useMutation({
    mutationFn: () => {
      if (tenantScope && !props.tenant) throw new Error('No tenant selected.');
      if (!tenantScope && !props.canPlatform) throw new Error('Only platform admins can create platform-wide tokens.');
      // The date input gives a local calendar day; the token stays valid through the end of that day.
      const expiresAt = expiry ? new Date(`${expiry}T23:59:59`).toISOString() : null;
      return api.adminTokens.create(name.trim(), tenantScope ? props.tenant!.id : null, expiresAt);
    },
    onSuccess: (created) => {
      void qc.invalidateQueries({ queryKey: ['adminTokens.list'] });
      setName('');
      setExpiry('');
      props.onCreated(created);
    },
  });
  const createOnce = useSingleFlight(create);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (name.trim()) createOnce(undefined);
  };
  const today = localDay();
  const tenantLabel = props.tenant?.name ?? 'this tenant';
  return (
    <form className="form create-admin-token" onSubmit={submit} aria-label="Create an admin token">
      <div className="field">
        <label htmlFor={`${id}-name`}>Token name</label>
        <input id={`${id}-name`} required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} placeholder="e.g. terraform, catalog sync" />
      </div>
      {props.canTenant && props.canPlatform ? (
        <fieldset>
          <legend>Scope</legend>
          <label className="checkbox">
            <input type="radio" name={`${id}-scope`} value="tenant" checked={scope === 'tenant'} onChange={() => setScope('tenant')} /> This tenant (
            {tenantLabel}): acts as its owner
          </label>
          <label className="checkbox">
            <input type="radio" name={`${id}-scope`} value="platform" checked={scope === 'platform'} onChange={() => setScope('platform')} /> Platform-wide:
            acts as a platform admin
          </label>
        </fieldset>
      ) : (
        <p className="muted" data-testid="admin-token-scope">
          Scope:{' '}
          {props.canTenant ? (
            <>
              this tenant (<strong>{tenantLabel}</strong>); the token acts as its owner.
            </>
          ) : (
            <>platform-wide; the token acts as a platform admin.</>
          )}
        </p>
      )}
      <div className="field">
        <label htmlFor={`${id}-exp`}>Expires (optional)</label>
        <input id={`${id}-exp`} type="date" min={today} value={expiry} onChange={(e) => setExpiry(e.target.value)} aria-describedby={`${id}-exp-hint`} />
        <p className="hint" id={`${id}-exp-hint`}>
          Valid through the end of that day. Leave empty for a token that does not expire.
        </p>
      </div>
      <div className="row">
        <button type="submit" className="primary" disabled={create.isPending || !name.trim()}>
          {create.isPending ? 'Creating…' : 'Create token'}
        </button>
      </div>
      {create.isError && <ErrorBox error={create.error} />}
    </form>
  );
}

/** The secret, shown this once, with a curl that uses it. */
function NewTokenNotice({ created, onDismiss }: { created: CreatedAdminToken; onDismiss(): void }) {
  const curl = graphqlCurl(window.location.origin, created.secret);
  return (
    <div className="new-key" role="status" aria-live="polite">
      <p className="warning">
        <strong>Copy this token now.</strong> This is the only time it is shown: the platform stores only its hash. Anyone holding it can manage{' '}
        {created.token.tenantId === null ? 'the whole platform' : 'this tenant'} through GraphQL and tRPC; keep it in a secret store. If you lose it, revoke it
        and create another.
      </p>
      <p className="secret-line">
        <code data-testid="new-admin-token-secret">{created.secret}</code> <CopyButton text={created.secret} label="Copy token" />
      </p>
      <div className="snippet">
        <p className="muted">Try it against the GraphQL API:</p>
        <pre>
          <code data-testid="admin-token-curl">{curl}</code>
        </pre>
        <CopyButton text={curl} label="Copy curl command" />
      </div>
      <p>
        <button type="button" onClick={onDismiss}>
          I have copied it
        </button>
      </p>
    </div>
  );
}

export function AdminTokensPage() {
  const session = useSession();
  const qc = useQueryClient();
  const id = useId();
  const me = session.me;
  const tenant = session.tenant;
  const isAdmin = me?.isPlatformAdmin ?? false;
  const isOwner = tenant?.role === 'owner';
  const canTenant = tenant !== null && (isOwner || isAdmin);
  const [viewChoice, setView] = useState<View>(isAdmin ? 'all' : 'tenant');
  const view: View = !isAdmin ? 'tenant' : !tenant ? 'all' : viewChoice;
  const listTenantId = view === 'tenant' ? tenant?.id : undefined;
  const allowed = isAdmin || isOwner;

  const tokens = useQuery({
    queryKey: ['adminTokens.list', listTenantId ?? 'all'],
    queryFn: () => api.adminTokens.list(listTenantId),
    enabled: allowed && (view === 'all' || listTenantId !== undefined),
  });
  // Platform admins see every token: name the tenant of each.
  const tenants = useQuery({ queryKey: ['tenants.all'], queryFn: () => api.tenants.all(), enabled: isAdmin && view === 'all' });
  const tenantName = (tenantId: string | null): string => {
    if (tenantId === null) return 'Platform-wide';
    if (tenant && tenant.id === tenantId) return tenant.name || tenant.slug;
    const t = tenants.data?.find((x) => x.id === tenantId);
    return t ? t.name || t.slug : `Tenant ${tenantId.slice(0, 8)}`;
  };

  const [created, setCreated] = useState<CreatedAdminToken | null>(null);
  const [revoking, setRevoking] = useState<AdminToken | null>(null);
  const revoke = useMutation({
    // Platform admins may revoke any token; owners only their tenant's.
    mutationFn: (t: AdminToken) => api.adminTokens.revoke(t.id, isAdmin ? undefined : (tenant?.id ?? undefined)),
    onSuccess: () => {
      setRevoking(null);
      void qc.invalidateQueries({ queryKey: ['adminTokens.list'] });
    },
  });

  if (!allowed) {
    return (
      <section>
        <h1>Admin tokens</h1>
        <p className="state error" role="alert">
          Admin tokens are managed by tenant owners and platform admins.
        </p>
      </section>
    );
  }
  return (
    <section>
      <h1>Admin tokens</h1>
      <p className="muted">
        Admin tokens let infrastructure automation call the GraphQL API (<code>/graphql</code>) and tRPC. They are not inference keys: send them as{' '}
        <code className="nowrap">Authorization: Bearer &lt;token&gt;</code> to the control plane, never to the chat-completions API.
      </p>
      <div className="panel">
        <h2>Create a token</h2>
        {created ? (
          <NewTokenNotice created={created} onDismiss={() => setCreated(null)} />
        ) : (
          <CreateTokenForm
            tenant={tenant ? { id: tenant.id, name: tenant.name || tenant.slug } : null}
            canTenant={canTenant}
            canPlatform={isAdmin}
            onCreated={setCreated}
          />
        )}
      </div>
      <div className="list-heading">
        <h2>{view === 'all' ? 'All admin tokens' : `Admin tokens of ${tenant?.name || tenant?.slug}`}</h2>
        {isAdmin && tenant && (
          <div className="field">
            <label htmlFor={`${id}-view`}>Show</label>
            <select id={`${id}-view`} value={view} onChange={(e) => setView(e.target.value as View)}>
              <option value="all">Every token (platform)</option>
              <option value="tenant">Tokens of {tenant.name || tenant.slug}</option>
            </select>
          </div>
        )}
      </div>
      <QueryView query={tokens} what="admin tokens">
        {(list) =>
          list.length === 0 ? (
            <Empty>No admin tokens yet. Create one above.</Empty>
          ) : (
            <DataTable
              className="keys-table admin-tokens-table"
              head={
                <>
                  <th scope="col">Name</th>
                  <th scope="col">Scope</th>
                  <th scope="col">Prefix</th>
                  <CredentialHeads />
                </>
              }
            >
              {list.map((t) => {
                return (
                  <tr key={t.id} data-token-id={t.id}>
                    <td data-label="Name">{t.name}</td>
                    <td data-label="Scope">{tenantName(t.tenantId)}</td>
                    <td data-label="Prefix">{t.prefix ? <code>{t.prefix}…</code> : '—'}</td>
                    <CredentialCells credential={t} onRevoke={() => setRevoking(t)} />
                  </tr>
                );
              })}
            </DataTable>
          )
        }
      </QueryView>
      <ConfirmDialog
        open={revoking !== null}
        title="Revoke this admin token?"
        confirmLabel={revoke.isPending ? 'Revoking…' : 'Revoke token'}
        danger
        busy={revoke.isPending}
        onConfirm={() => revoking && revoke.mutate(revoking)}
        onCancel={() => {
          setRevoking(null);
          revoke.reset();
        }}
      >
        <p>
          Automation using <strong>{revoking?.name}</strong>
          {revoking?.prefix ? (
            <>
              {' '}
              (<code>{revoking.prefix}…</code>)
            </>
          ) : null}{' '}
          will be refused from its next request. This cannot be undone.
        </p>
        {revoke.isError && <ErrorBox error={revoke.error} />}
      </ConfirmDialog>
    </section>
  );
}
