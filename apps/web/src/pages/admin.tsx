import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api, type AuditRow, type Tenant } from '../api.tsx';
import { Empty, ErrorBox, QueryView } from '../components/states.tsx';
import { Tabs } from '../components/tabs.tsx';
import { formatDate } from '../lib/format.ts';
import { useRouter } from '../router.tsx';
import { AdminCatalog } from './admin-catalog.tsx';

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
    onSuccess: (r) => { setSent(r.email); setEmail(''); done(); },
  });
  const remove = useMutation({ mutationFn: (userId: string) => api.tenants.removeMember(tenant.id, userId), onSuccess: done });
  const revoke = useMutation({ mutationFn: (id: string) => api.tenants.revokeInvitation(tenant.id, id), onSuccess: done });
  return (
    <div className="panel">
      <h3>Members of {tenant.name || tenant.slug}</h3>
      <QueryView query={members} what="members">
        {(list) =>
          list.length === 0 ? <Empty>No members.</Empty> : (
            <ul>
              {list.map((m) => (
                <li key={m.userId} className="row">
                  {m.email} <span className="pill">{m.role}</span>
                  <button type="button" className="danger" onClick={() => remove.mutate(m.userId)} disabled={remove.isPending} aria-label={`Remove ${m.email}`}>Remove</button>
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
          list.length === 0 ? <Empty>No pending invitations.</Empty> : (
            <ul>
              {list.map((i) => (
                <li key={i.id} className="row">
                  {i.email} <span className="pill">{i.role}</span> <span className="muted">expires {formatDate(i.expiresAt)}</span>
                  <button type="button" className="danger" onClick={() => revoke.mutate(i.id)} disabled={revoke.isPending} aria-label={`Revoke the invitation of ${i.email}`}>Revoke</button>
                </li>
              ))}
            </ul>
          )
        }
      </QueryView>
      {revoke.isError && <ErrorBox error={revoke.error} />}
      <form className="form inline" onSubmit={(e) => { e.preventDefault(); setSent(null); invite.mutate(); }} aria-label="Invite a member">
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
        <button type="submit" disabled={invite.isPending || !email.trim()}>Invite</button>
      </form>
      {sent && <p role="status" className="muted">Invitation sent to {sent}. They join when they accept it, logged in with that email.</p>}
      {invite.isError && <ErrorBox error={invite.error} />}
    </div>
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
      setSlug(''); setName(''); setOwner('');
      setSelected(t.id);
      void qc.invalidateQueries({ queryKey: ['tenants.all'] });
    },
  });
  const submit = (e: FormEvent) => { e.preventDefault(); create.mutate(); };
  return (
    <>
      <form className="form inline" onSubmit={submit} aria-label="New tenant">
        <div className="field"><label htmlFor="t-slug">Slug</label><input id="t-slug" required pattern="[a-z0-9][a-z0-9-]*" value={slug} onChange={(e) => setSlug(e.target.value)} /></div>
        <div className="field"><label htmlFor="t-name">Name</label><input id="t-name" value={name} onChange={(e) => setName(e.target.value)} /></div>
        <div className="field"><label htmlFor="t-owner">Owner email (optional)</label><input id="t-owner" type="email" value={owner} onChange={(e) => setOwner(e.target.value)} /></div>
        <button type="submit" className="primary" disabled={create.isPending || !slug.trim()}>Create tenant</button>
      </form>
      {create.isError && <ErrorBox error={create.error} />}
      <QueryView query={tenants} what="tenants">
        {(list) =>
          list.length === 0 ? <Empty>No tenants yet.</Empty> : (
            <>
              <div className="table-wrap">
                <table>
                  <thead><tr><th scope="col">Slug</th><th scope="col">Name</th><th scope="col">Limits (rpm / tpm)</th><th scope="col"><span className="visually-hidden">Actions</span></th></tr></thead>
                  <tbody>
                    {list.map((t) => (
                      <tr key={t.id}>
                        <td><code>{t.slug}</code></td>
                        <td>{t.name}</td>
                        <td>{t.rpmLimit ?? '—'} / {t.tpmLimit ?? '—'}</td>
                        <td><button type="button" aria-pressed={selected === t.id} onClick={() => setSelected(selected === t.id ? null : t.id)}>Members</button></td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
              {selected && list.find((t) => t.id === selected) && <Members tenant={list.find((t) => t.id === selected) as Tenant} />}
            </>
          )
        }
      </QueryView>
    </>
  );
}

function Audit() {
  const [pages, setPages] = useState<(number | undefined)[]>([undefined]);
  const before = pages[pages.length - 1];
  const audit = useQuery({ queryKey: ['audit.list', before], queryFn: () => api.audit.list({ limit: 50, ...(before ? { before } : {}) }) });
  const detail = (r: AuditRow) => (r.detail == null ? '' : JSON.stringify(r.detail));
  return (
    <QueryView query={audit} what="the audit log">
      {(rows) => (
        <>
          {rows.length === 0 ? <Empty>No audit entries.</Empty> : (
            <div className="table-wrap">
              <table>
                <thead><tr><th scope="col">When</th><th scope="col">Actor</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col">Detail</th></tr></thead>
                <tbody>
                  {rows.map((r) => (
                    <tr key={r.id}>
                      <td>{formatDate(r.createdAt)}</td>
                      <td>{r.actorEmail ?? (r.actorTokenId ? 'admin token' : 'system')}</td>
                      <td><code>{r.action}</code></td>
                      <td>{r.targetType}{r.targetId ? ` ${r.targetId.slice(0, 8)}` : ''}</td>
                      <td className="small">{detail(r)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          <div className="row">
            <button type="button" disabled={pages.length < 2} onClick={() => setPages(pages.slice(0, -1))}>Newer</button>
            <button type="button" disabled={rows.length < 50} onClick={() => setPages([...pages, rows[rows.length - 1]?.id])}>Older</button>
          </div>
        </>
      )}
    </QueryView>
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
          tabs={[{ key: 'catalog', label: 'Catalog' }, { key: 'tenants', label: 'Tenants' }, { key: 'audit', label: 'Audit log' }]}
          value={['catalog', 'tenants', 'audit'].includes(section) ? section : 'catalog'}
          onChange={(s) => navigate(`/admin?section=${s}`, { replace: true })}
        >
          {section === 'tenants' ? <Tenants /> : section === 'audit' ? <Audit /> : <AdminCatalog />}
        </Tabs>
      </div>
    </section>
  );
}
