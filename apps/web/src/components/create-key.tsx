import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { api, type CreatedKey } from '../api.tsx';
import { useSession } from '../session.tsx';
import { CopyButton } from './copy-button.tsx';
import { ErrorBox } from './states.tsx';
import { localDay } from '../lib/format.ts';
import { useSingleFlight } from '../lib/single-flight.ts';

/** Name + optional expiry; on success the secret goes to `onCreated` (and to this tab's session keys). */
export function CreateKeyForm(props: { onCreated(k: CreatedKey): void; defaultName?: string; compact?: boolean }) {
  const id = useId();
  const session = useSession();
  const qc = useQueryClient();
  const [name, setName] = useState(props.defaultName ?? '');
  const [expiry, setExpiry] = useState('');
  const tenantId = session.tenantId;
  const create = useMutation({
    mutationFn: () => {
      if (!tenantId) throw new Error('No tenant selected.');
      // The date input gives a local calendar day; the key stays valid through the end of that day.
      const expiresAt = expiry ? new Date(`${expiry}T23:59:59`).toISOString() : null;
      return api.keys.create(tenantId, name.trim(), expiresAt);
    },
    onSuccess: (created) => {
      if (tenantId) {
        session.addSessionKey({ id: created.key.id, tenantId, name: created.key.name, prefix: created.key.prefix, secret: created.secret });
      }
      void qc.invalidateQueries({ queryKey: ['keys.list'] });
      setName(props.defaultName ?? '');
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
  return (
    <form className={`form create-key${props.compact ? ' compact' : ''}`} onSubmit={submit}>
      <div className="field">
        <label htmlFor={`${id}-name`}>Key name</label>
        <input id={`${id}-name`} required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} placeholder="e.g. laptop, CI" />
      </div>
      <div className="field">
        <label htmlFor={`${id}-exp`}>Expires (optional)</label>
        <input id={`${id}-exp`} type="date" min={today} value={expiry} onChange={(e) => setExpiry(e.target.value)} />
      </div>
      <button type="submit" className="primary" disabled={create.isPending || !name.trim()}>
        {create.isPending ? 'Creating…' : 'Create key'}
      </button>
      {create.isError && <ErrorBox error={create.error} />}
    </form>
  );
}

/** The secret, shown this once. */
export function NewKeyNotice({ created, onDismiss }: { created: CreatedKey; onDismiss(): void }) {
  return (
    <div className="new-key" role="status" aria-live="polite">
      <p className="warning">
        <strong>Copy this key now.</strong> This is the only time it is shown: the platform stores only its hash. If you lose it, revoke it and create another.
      </p>
      <p className="secret-line">
        <code data-testid="new-key-secret">{created.secret}</code> <CopyButton text={created.secret} label="Copy key" />
      </p>
      <button type="button" onClick={onDismiss}>
        I have copied it
      </button>
    </div>
  );
}
