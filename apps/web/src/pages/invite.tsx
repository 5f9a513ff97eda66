import { useMutation, useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api } from '../api.tsx';
import { ErrorBox, QueryView } from '../components/states.tsx';
import { formatDate } from '../lib/format.ts';
import { Link, useRouter } from '../router.tsx';
import { useSession } from '../session.tsx';

/**
 * An invitation link (`/invite?token=…`, from a tenant owner): the invitee creates their account with the invited
 * email and joins, or, when that email has an account, logs in and accepts.
 */
export function InvitePage() {
  const { location, navigate } = useRouter();
  const session = useSession();
  const token = location.query.get('token') ?? '';
  const preview = useQuery({ queryKey: ['auth.invitation', token], queryFn: () => api.auth.invitation(token), enabled: token !== '', retry: false });
  const [displayName, setDisplayName] = useState('');
  const [password, setPassword] = useState('');
  const [confirm, setConfirm] = useState('');
  const joined = async (tenantId: string) => {
    await session.refresh();
    session.setTenantId(tenantId);
    navigate('/keys', { replace: true });
  };
  const signUp = useMutation({
    mutationFn: () => api.auth.signUpWithInvitation(token, password, displayName.trim() || null),
    onSuccess: (r) => joined(r.tenantId),
  });
  const accept = useMutation({ mutationFn: () => api.invitations.acceptLink(token), onSuccess: (r) => joined(r.tenantId) });
  const mismatch = password !== '' && confirm !== '' && password !== confirm;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!mismatch) signUp.mutate();
  };
  const here = `/invite?token=${encodeURIComponent(token)}`;

  if (token === '')
    return (
      <section className="narrow">
        <h1>Invitation</h1>
        <p className="state error">This link has no invitation in it: open the whole link you were sent.</p>
      </section>
    );
  return (
    <section className="narrow">
      <h1>Invitation</h1>
      <QueryView query={preview} what="invitation">
        {(inv) => {
          const me = session.me?.kind === 'user' ? session.me.user : null;
          return (
            <>
              <p>
                You are invited to join <strong>{inv.tenantName || inv.tenantSlug}</strong> as <span className="pill">{inv.role}</span>, as{' '}
                <strong>{inv.email}</strong>. <span className="muted">The invitation expires {formatDate(inv.expiresAt)}.</span>
              </p>
              {me && me.email.toLowerCase() === inv.email ? (
                <>
                  <button type="button" className="primary" onClick={() => accept.mutate()} disabled={accept.isPending}>
                    {accept.isPending ? 'Joining…' : `Join ${inv.tenantName || inv.tenantSlug}`}
                  </button>
                  {accept.isError && <ErrorBox error={accept.error} />}
                </>
              ) : me ? (
                <p className="state error">
                  You are logged in as {me.email}; this invitation is for {inv.email}. Log out, then open the link again.
                </p>
              ) : inv.hasAccount ? (
                <p>
                  {inv.email} has an account: <Link to={`/login?next=${encodeURIComponent(here)}`}>log in</Link> with it to accept.
                </p>
              ) : (
                <form className="form" onSubmit={submit} aria-label="Create your account">
                  <p className="muted">Create your account to accept: your email is the invited one.</p>
                  <div className="field">
                    <label htmlFor="invite-email">Email</label>
                    <input id="invite-email" type="email" autoComplete="username" value={inv.email} readOnly />
                  </div>
                  <div className="field">
                    <label htmlFor="invite-name">Your name (optional)</label>
                    <input id="invite-name" maxLength={100} value={displayName} onChange={(e) => setDisplayName(e.target.value)} />
                  </div>
                  <div className="field">
                    <label htmlFor="invite-password">Password (at least 8 characters)</label>
                    <input
                      id="invite-password"
                      type="password"
                      autoComplete="new-password"
                      minLength={8}
                      maxLength={1024}
                      required
                      value={password}
                      onChange={(e) => setPassword(e.target.value)}
                    />
                  </div>
                  <div className="field">
                    <label htmlFor="invite-confirm">Password again</label>
                    <input
                      id="invite-confirm"
                      type="password"
                      autoComplete="new-password"
                      required
                      value={confirm}
                      onChange={(e) => setConfirm(e.target.value)}
                      aria-invalid={mismatch}
                      aria-describedby={mismatch ? 'invite-mismatch' : undefined}
                    />
                    {mismatch && (
                      <p id="invite-mismatch" className="state error">
                        The two passwords differ.
                      </p>
                    )}
                  </div>
                  <button type="submit" className="primary" disabled={signUp.isPending || mismatch}>
                    {signUp.isPending ? 'Creating your account…' : 'Create account and join'}
                  </button>
                  {signUp.isError && <ErrorBox error={signUp.error} />}
                </form>
              )}
            </>
          );
        }}
      </QueryView>
    </section>
  );
}
