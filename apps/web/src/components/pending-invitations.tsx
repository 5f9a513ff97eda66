import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api } from '../api.tsx';
import { formatDate } from '../lib/format.ts';
import { useSession } from '../session.tsx';
import { ErrorBox } from './states.tsx';

/**
 * Invitations addressed to the logged-in user's email: nobody joins a tenant without accepting here.
 * Renders nothing when there are none (or for admin tokens and anonymous visitors).
 */
export function PendingInvitations() {
  const session = useSession();
  const qc = useQueryClient();
  const isUser = session.me?.kind === 'user';
  const invitations = useQuery({ queryKey: ['invitations.mine'], queryFn: () => api.invitations.mine(), enabled: isUser });
  const answer = useMutation({
    mutationFn: ({ id, accept }: { id: string; accept: boolean }) => (accept ? api.invitations.accept(id) : api.invitations.decline(id)),
    onSuccess: async (result) => {
      await qc.invalidateQueries({ queryKey: ['invitations.mine'] });
      if (result.status === 'accepted') {
        await session.refresh();
        session.setTenantId(result.tenantId);
      }
    },
  });
  const list = invitations.data ?? [];
  if (!isUser || list.length === 0) return null;
  return (
    <section className="panel invitations" aria-label="Pending invitations">
      <h2>Invitations</h2>
      <ul>
        {list.map((i) => (
          <li key={i.id} className="row">
            <span>
              Join <strong>{i.tenantName || i.tenantSlug}</strong> as <span className="pill">{i.role}</span>
              {i.invitedByEmail ? <span className="muted"> (invited by {i.invitedByEmail})</span> : null}
              <span className="muted"> · expires {formatDate(i.expiresAt)}</span>
            </span>
            <button type="button" className="primary" onClick={() => answer.mutate({ id: i.id, accept: true })} disabled={answer.isPending}>
              Accept
            </button>
            <button type="button" onClick={() => answer.mutate({ id: i.id, accept: false })} disabled={answer.isPending}>
              Decline
            </button>
          </li>
        ))}
      </ul>
      {answer.isError && <ErrorBox error={answer.error} />}
    </section>
  );
}
