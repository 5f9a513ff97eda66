import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api, type AuditRow, type Tenant } from '../api.tsx';
import { Empty, ErrorBox, QueryView } from '../components/states.tsx';
import { Tabs } from '../components/tabs.tsx';
import { formatDate, formatShortDate } from '../lib/format.ts';
import { useRouter } from '../router.tsx';
import { AdminCatalog } from './admin-catalog.tsx';
import { ActionsHeader, DataTable } from '../components/data-table.tsx';

type Section = 'catalog' | 'tenants' | 'audit';

function Members({ tenant }: { tenant: Tenant }) {
  const qc = useQueryClient();
  const members = useQuery({ queryKey: ['tenants.members', tenant.id], queryFn: () => api.tenants.members(tenant.id) });
  const invitations = useQuery({ queryKey: ['tenants.invitations', tenant.id], queryFn: () => api.tenants.invitations(tenant.id) });
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<'owner' | 'member'>('member');
  const [sent, setSent] = useState<string | null>(null);
  const done = () => {
    void qc.invalidateQueries({ queryKey: ['tenants.members', tenant.id] });
    void qc.invalidateQueries({ queryKey: ['tenants.invitations', tenant.id] });
  };
  // The reply is the same whether or not the email has an account: the person joins when they accept.
  const invite = useMutation({
    mutationFn: () => api.tenants.addMember(tenant.id, email.trim(), role),
    onSuccess: (r) => {
      setSent(r.email);
      setEmail('');
      done();
    },
  });
  const remove = useMutation({ mutationFn: (userId: string) => api.tenants.removeMember(tenant.id, userId), onSuccess: done });
  const revoke = useMutation({ mutationFn: (id: string) => api.tenants.revokeInvitation(tenant.id, id), onSuccess: done });
  return (
    <div className="panel">
      <h3>Members of {tenant.name || tenant.slug}</h3>
      <QueryView query={members} what="members">
        {(list) =>
          list.length === 0 ? (
            <Empty>No members.</Empty>
          ) : (
            <ul>
              {list.map((m) => (
                <li key={m.userId} className="row">
                  {m.email} <span className="pill">{m.role}</span>
                  <button
                    type="button"
                    className="danger"
                    onClick={() => remove.mutate(m.userId)}
                    disabled={remove.isPending}
                    aria-label={`Remove ${m.email}`}
                    title="Removes them from the tenant and revokes the API keys and admin tokens they created"
                  >
                    Remove
                  </button>
                </li>
              ))}
            </ul>
          )
        }
      </QueryView>
      {remove.isError && <ErrorBox error={remove.error} />}
      <h4>Pending invitations</h4>
      <QueryView query={invitations} what="invitations">
        {(list) =>
          list.length === 0 ? (
            <Empty>No pending invitations.</Empty>
          ) : (
            <ul>
              {list.map((i) => (
                <li key={i.id} className="row">
                  {i.email} <span className="pill">{i.role}</span> <span className="muted">expires {formatDate(i.expiresAt)}</span>
                  <button
                    type="button"
                    className="danger"
                    onClick={() => revoke.mutate(i.id)}
                    disabled={revoke.isPending}
                    aria-label={`Revoke the invitation of ${i.email}`}
                  >
                    Revoke
                  </button>
                </li>
              ))}
            </ul>
          )
        }
      </QueryView>
      {revoke.isError && <ErrorBox error={revoke.error} />}
      <form
        className="form inline"
        onSubmit={(e) => {
          e.preventDefault();
          setSent(null);
          invite.mutate();
        }}
        aria-label="Invite a member"
      >
        <div className="field">
          <label htmlFor={`member-email-${tenant.id}`}>Email to invite</label>
          <input id={`member-email-${tenant.id}`} type="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </div>
        <div className="field">
          <label htmlFor={`member-role-${tenant.id}`}>Role</label>
          <select id={`member-role-${tenant.id}`} value={role} onChange={(e) => setRole(e.target.value as 'owner' | 'member')}>
            <option value="member">member</option>
            <option value="owner">owner</option>
          </select>
        </div>
        <button type="submit" disabled={invite.isPending || !email.trim()}>
          Invite
        </button>
      </form>
      {sent && (
        <p role="status" className="muted">
          Invitation sent to {sent}. They join when they accept it, logged in with that email.
        </p>
      )}
      {invite.isError && <ErrorBox error={invite.error} />}
    </div>
  );
}

/** A tenant's requests- and tokens-per-minute limits, edited in place (empty: no limit). */
function LimitsCell({ tenant }: { tenant: Tenant }) {
  const qc = useQueryClient();
  const [editing, setEditing] = useState(false);
  const [rpm, setRpm] = useState(tenant.rpmLimit == null ? '' : String(tenant.rpmLimit));
  const [tpm, setTpm] = useState(tenant.tpmLimit == null ? '' : String(tenant.tpmLimit));
  const parse = (v: string): number | null | 'bad' => {
    const t = v.trim().replace(/[_,\s]/g, '');
    if (t === '') return null;
    return /^\d+$/.test(t) && Number(t) >= 1 && Number(t) <= 1_000_000_000 ? Number(t) : 'bad';
  };
  const r = parse(rpm);
  const k = parse(tpm);
  const save = useMutation({
    mutationFn: () => api.tenants.setLimits(tenant.id, r as number | null, k as number | null),
    onSuccess: () => {
      setEditing(false);
      void qc.invalidateQueries({ queryKey: ['tenants.all'] });
    },
  });
  const show = (n: number | null) => (n == null ? 'no limit' : n.toLocaleString('en-US'));
  const summary = `Requests/min: ${show(tenant.rpmLimit)} · Tokens/min: ${show(tenant.tpmLimit)}`;
  if (!editing) {
    return (
      <span className="limits">
        <span data-testid={`limits-${tenant.slug}`}>{summary}</span>{' '}
        <button type="button" className="link-button" onClick={() => setEditing(true)} aria-label={`Edit the rate limits of ${tenant.slug}`}>
          Edit
        </button>
      </span>
    );
  }
  return (
    <form
      className="limits-form"
      aria-label={`Rate limits of ${tenant.slug}`}
      onSubmit={(e) => {
        e.preventDefault();
        if (r !== 'bad' && k !== 'bad') save.mutate();
      }}
    >
      <div className="field">
        <label htmlFor={`rpm-${tenant.id}`}>Requests / min</label>
        <input
          id={`rpm-${tenant.id}`}
          inputMode="numeric"
          value={rpm}
          placeholder="no limit"
          aria-invalid={r === 'bad' || undefined}
          onChange={(e) => setRpm(e.target.value)}
        />
      </div>
      <div className="field">
        <label htmlFor={`tpm-${tenant.id}`}>Tokens / min</label>
        <input
          id={`tpm-${tenant.id}`}
          inputMode="numeric"
          value={tpm}
          placeholder="no limit"
          aria-invalid={k === 'bad' || undefined}
          onChange={(e) => setTpm(e.target.value)}
        />
      </div>
      {(r === 'bad' || k === 'bad') && <p className="field-error">A whole number from 1 to 1,000,000,000, or empty for no limit.</p>}
      <div className="row">
        <button type="submit" className="primary" disabled={save.isPending || r === 'bad' || k === 'bad'}>
          {save.isPending ? 'Saving…' : 'Save limits'}
        </button>
        <button
          type="button"
          onClick={() => {
            setEditing(false);
            save.reset();
          }}
        >
          Cancel
        </button>
      </div>
      {save.isError && <ErrorBox error={save.error} />}
    </form>
  );
}

function Tenants() {
  const qc = useQueryClient();
  const tenants = useQuery({ queryKey: ['tenants.all'], queryFn: () => api.tenants.all() });
  const [selected, setSelected] = useState<string | null>(null);
  const [slug, setSlug] = useState('');
  const [name, setName] = useState('');
  const [owner, setOwner] = useState('');
  const create = useMutation({
    mutationFn: () => api.tenants.create(slug.trim(), name.trim(), owner.trim() || undefined),
    onSuccess: (t) => {
      setSlug('');
      setName('');
      setOwner('');
      setSelected(t.id);
      void qc.invalidateQueries({ queryKey: ['tenants.all'] });
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate();
  };
  return (
    <>
      <form className="form inline" onSubmit={submit} aria-label="New tenant">
        <div className="field">
          <label htmlFor="t-slug">Slug</label>
          <input
            id="t-slug"
            required
            maxLength={63}
            pattern="[a-z0-9][a-z0-9\-]*"
            title="Lowercase letters, digits and dashes; starts with a letter or digit"
            value={slug}
            onChange={(e) => setSlug(e.target.value)}
          />
        </div>
        <div className="field">
          <label htmlFor="t-name">Name</label>
          <input id="t-name" value={name} onChange={(e) => setName(e.target.value)} />
        </div>
        <div className="field">
          <label htmlFor="t-owner">Owner email (optional)</label>
          <input id="t-owner" type="email" value={owner} onChange={(e) => setOwner(e.target.value)} />
        </div>
        <button type="submit" className="primary" disabled={create.isPending || !slug.trim()}>
          Create tenant
        </button>
      </form>
      {create.isError && <ErrorBox error={create.error} />}
      <QueryView query={tenants} what="tenants">
        {(list) =>
          list.length === 0 ? (
            <Empty>No tenants yet.</Empty>
          ) : (
            <>
              <DataTable
                className="stack-table"
                head={
                  <>
                    <th scope="col">Slug</th>
                    <th scope="col">Name</th>
                    <th scope="col">Rate limits</th>
                    <ActionsHeader />
                  </>
                }
              >
                {list.map((t) => (
                  <tr key={t.id}>
                    <td data-label="Slug">
                      <code>{t.slug}</code>
                    </td>
                    <td data-label="Name">{t.name}</td>
                    <td data-label="Rate limits">
                      <LimitsCell tenant={t} />
                    </td>
                    <td>
                      <button
                        type="button"
                        aria-pressed={selected === t.id}
                        onClick={() => setSelected(selected === t.id ? null : t.id)}
                        aria-label={`Members of ${t.slug}`}
                      >
                        Members
                      </button>
                    </td>
                  </tr>
                ))}
              </DataTable>
              {selected && list.find((t) => t.id === selected) && <Members tenant={list.find((t) => t.id === selected) as Tenant} />}
            </>
          )
        }
      </QueryView>
    </>
  );
}

/** One detail value as text a person reads. */
function detailValue(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return v.map(detailValue).join(', ');
  return Object.entries(v as Record<string, unknown>)
    .map(([k, x]) => `${k}: ${detailValue(x)}`)
    .join('; ');
}

/** An audit row's detail as label/value pairs ("minReplicas 0 → 2" stays as the service wrote it). */
function AuditDetail({ detail }: { detail: AuditRow['detail'] }) {
  if (detail == null) return <span className="muted">—</span>;
  if (typeof detail !== 'object' || Array.isArray(detail)) return <span>{detailValue(detail)}</span>;
  const entries = Object.entries(detail as Record<string, unknown>);
  if (entries.length === 0) return <span className="muted">—</span>;
  return (
    <dl className="audit-detail">
      {entries.map(([k, v]) => (
        <div key={k}>
          <dt>{k.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase()}</dt>
          <dd>{detailValue(v)}</dd>
        </div>
      ))}
    </dl>
  );
}

const actorOf = (r: AuditRow) => r.actorEmail ?? (r.actorTokenId ? `admin token ${r.actorTokenId.slice(0, 8)}` : 'system');
const SINCE = [
  { key: 'all', label: 'Any time', ms: 0 },
  { key: '1h', label: 'Last hour', ms: 3_600_000 },
  { key: '24h', label: 'Last 24 hours', ms: 86_400_000 },
  { key: '7d', label: 'Last 7 days', ms: 7 * 86_400_000 },
] as const;

function Audit() {
  const [pages, setPages] = useState<(number | undefined)[]>([undefined]);
  const [action, setAction] = useState('');
  const [actor, setActor] = useState('');
  const [since, setSince] = useState<(typeof SINCE)[number]['key']>('all');
  const before = pages[pages.length - 1];
  const limit = 200;
  // The action filter runs on the server (exact action); actor and time filter the loaded page.
  const audit = useQuery({
    queryKey: ['audit.list', before, action],
    queryFn: () => api.audit.list({ limit, ...(before ? { before } : {}), ...(action ? { action } : {}) }),
    placeholderData: keepPreviousData,
  });
  const known = useQuery({ queryKey: ['audit.list', 'actions'], queryFn: () => api.audit.list({ limit: 500 }), staleTime: 60_000 });
  const actions = [...new Set((known.data ?? []).map((r) => r.action))].sort();
  const actors = [...new Set((known.data ?? []).map(actorOf))].sort();
  const sinceMs = SINCE.find((x) => x.key === since)?.ms ?? 0;
  const cutoff = sinceMs ? Date.now() - sinceMs : 0;
  const reset = () => setPages([undefined]);
  return (
    <>
      <form className="filter-bar" aria-label="Audit filters" onSubmit={(e) => e.preventDefault()}>
        <div className="field">
          <label htmlFor="audit-action">Action</label>
          <select
            id="audit-action"
            value={action}
            onChange={(e) => {
              setAction(e.target.value);
              reset();
            }}
          >
            <option value="">All actions</option>
            {actions.map((a) => (
              <option key={a} value={a}>
                {a}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor="audit-actor">Actor</label>
          <input id="audit-actor" list="audit-actors" value={actor} placeholder="email or token" onChange={(e) => setActor(e.target.value)} />
          <datalist id="audit-actors">
            {actors.map((a) => (
              <option key={a} value={a} />
            ))}
          </datalist>
        </div>
        <div className="field">
          <label htmlFor="audit-since">Time</label>
          <select id="audit-since" value={since} onChange={(e) => setSince(e.target.value as typeof since)}>
            {SINCE.map((x) => (
              <option key={x.key} value={x.key}>
                {x.label}
              </option>
            ))}
          </select>
        </div>
      </form>
      <QueryView query={audit} what="the audit log">
        {(all) => {
          const rows = all.filter(
            (r) => (!actor.trim() || actorOf(r).toLowerCase().includes(actor.trim().toLowerCase())) && (!cutoff || new Date(r.createdAt).getTime() >= cutoff),
          );
          return (
            <>
              {rows.length === 0 ? (
                <Empty>No audit entries match.</Empty>
              ) : (
                <ol className="audit-list" data-testid="audit-list">
                  {rows.map((r) => (
                    <li key={r.id} className="audit-item">
                      <div className="audit-head">
                        <code className="audit-action">{r.action}</code>
                        <time className="nowrap muted small" dateTime={new Date(r.createdAt).toISOString()} title={new Date(r.createdAt).toLocaleString()}>
                          {formatShortDate(r.createdAt)}
                        </time>
                      </div>
                      <p className="audit-meta small">
                        <span>{actorOf(r)}</span>
                        <span className="muted">
                          {' '}
                          on {r.targetType}
                          {r.targetId ? (
                            <>
                              {' '}
                              <code title={r.targetId}>{r.targetId.slice(0, 8)}</code>
                            </>
                          ) : null}
                        </span>
                      </p>
                      <AuditDetail detail={r.detail} />
                    </li>
                  ))}
                </ol>
              )}
              <div className="row">
                <button type="button" disabled={pages.length < 2} onClick={() => setPages(pages.slice(0, -1))}>
                  Newer
                </button>
                <button type="button" disabled={all.length < limit} onClick={() => setPages([...pages, all[all.length - 1]?.id])}>
                  Older
                </button>
                <span className="muted small">
                  {rows.length} of {all.length} loaded entries shown
                </span>
              </div>
            </>
          );
        }}
      </QueryView>
    </>
  );
}

export function AdminPage() {
  const { location, navigate } = useRouter();
  const section = (location.query.get('section') as Section | null) ?? 'catalog';
  return (
    <section>
      <h1>Platform admin</h1>
      <div className="admin-tabs">
        <Tabs
          label="Admin sections"
          tabs={[
            { key: 'catalog', label: 'Catalog' },
            { key: 'tenants', label: 'Tenants' },
            { key: 'audit', label: 'Audit log' },
          ]}
          value={['catalog', 'tenants', 'audit'].includes(section) ? section : 'catalog'}
          onChange={(s) => navigate(`/admin?section=${s}`, { replace: true })}
        >
          {section === 'tenants' ? <Tenants /> : section === 'audit' ? <Audit /> : <AdminCatalog />}
        </Tabs>
      </div>
    </section>
  );
}
