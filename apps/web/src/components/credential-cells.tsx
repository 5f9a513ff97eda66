import { formatDate } from '../lib/format.ts';
import { ActionsHeader } from './data-table.tsx';

/** What API keys and admin tokens share in a list: dates, revocation and expiry. */
export interface CredentialLike {
  readonly name: string;
  readonly createdAt: string;
  readonly lastUsedAt: string | null;
  readonly expiresAt: string | null;
  readonly revokedAt: string | null;
}

export type CredentialStatus = 'revoked' | 'expired' | 'active';

export function credentialStatus(c: CredentialLike): CredentialStatus {
  if (c.revokedAt) return 'revoked';
  if (c.expiresAt && new Date(c.expiresAt).getTime() <= Date.now()) return 'expired';
  return 'active';
}

/** The header cells over CredentialCells, in the same order. */
export function CredentialHeads() {
  return (
    <>
      <th scope="col">Created</th>
      <th scope="col">Last used</th>
      <th scope="col">Expires</th>
      <th scope="col">Status</th>
      <ActionsHeader />
    </>
  );
}

/** The trailing cells of a key or token row: created, last used, expiry, status and the revoke button. */
export function CredentialCells({ credential, onRevoke }: { credential: CredentialLike; onRevoke: () => void }) {
  const status = credentialStatus(credential);
  return (
    <>
      <td data-label="Created">{formatDate(credential.createdAt)}</td>
      <td data-label="Last used">{credential.lastUsedAt ? formatDate(credential.lastUsedAt) : 'Never'}</td>
      <td data-label="Expires">{credential.expiresAt ? formatDate(credential.expiresAt) : 'Never'}</td>
      <td data-label="Status">
        <span className={`state-badge s-${status}`}>{status}</span>
      </td>
      <td>
        {status !== 'revoked' && (
          <button type="button" className="danger" onClick={onRevoke} aria-label={`Revoke ${credential.name}`}>
            Revoke
          </button>
        )}
      </td>
    </>
  );
}
