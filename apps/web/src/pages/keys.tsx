import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, type ApiKey, type CreatedKey } from '../api.tsx';
import { ConfirmDialog } from '../components/confirm.tsx';
import { CreateKeyForm, NewKeyNotice } from '../components/create-key.tsx';
import { CredentialCells, CredentialHeads } from '../components/credential-cells.tsx';
import { Empty, ErrorBox, QueryView } from '../components/states.tsx';
import { useSession } from '../session.tsx';
import { DataTable } from '../components/data-table.tsx';

export function KeysPage() {
  const session = useSession();
  const tenantId = session.tenantId as string;
  const qc = useQueryClient();
  const keys = useQuery({ queryKey: ['keys.list', tenantId], queryFn: () => api.keys.list(tenantId) });
  const [created, setCreated] = useState<CreatedKey | null>(null);
  const [revoking, setRevoking] = useState<ApiKey | null>(null);
  const revoke = useMutation({
    mutationFn: (k: ApiKey) => api.keys.revoke(tenantId, k.id),
    onSuccess: (_r, k) => {
      session.forgetSessionKey(k.id);
      setRevoking(null);
      void qc.invalidateQueries({ queryKey: ['keys.list'] });
    },
  });
  return (
    <section>
      <h1>API keys</h1>
      <p className="muted">
        One inference API key serves both the shared and the dedicated surfaces. Send it as <code>Authorization: Bearer &lt;key&gt;</code>.
      </p>
      <div className="panel">
        <h2>Create a key</h2>
        {created ? <NewKeyNotice created={created} onDismiss={() => setCreated(null)} /> : <CreateKeyForm onCreated={setCreated} />}
      </div>
      <h2>Keys of {session.tenant?.name || session.tenant?.slug}</h2>
      <QueryView query={keys} what="keys">
        {(list) =>
          list.length === 0 ? (
            <Empty>No keys yet. Create one above.</Empty>
          ) : (
            <DataTable
              className="keys-table"
              head={
                <>
                  <th scope="col">Name</th>
                  <th scope="col">Prefix</th>
                  <CredentialHeads />
                </>
              }
            >
              {list.map((k) => {
                return (
                  <tr key={k.id} data-key-id={k.id}>
                    <td data-label="Name">{k.name}</td>
                    <td data-label="Prefix">
                      <code>{k.prefix}…</code>
                    </td>
                    <CredentialCells credential={k} onRevoke={() => setRevoking(k)} />
                  </tr>
                );
              })}
            </DataTable>
          )
        }
      </QueryView>
      <ConfirmDialog
        open={revoking !== null}
        title="Revoke this key?"
        confirmLabel={revoke.isPending ? 'Revoking…' : 'Revoke key'}
        danger
        busy={revoke.isPending}
        onConfirm={() => revoking && revoke.mutate(revoking)}
        onCancel={() => {
          setRevoking(null);
          revoke.reset();
        }}
      >
        <p>
          Requests with <strong>{revoking?.name}</strong> (<code>{revoking?.prefix}…</code>) will be refused within seconds. This cannot be undone.
        </p>
        {revoke.isError && <ErrorBox error={revoke.error} />}
      </ConfirmDialog>
    </section>
  );
}
