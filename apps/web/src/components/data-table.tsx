import type { ReactNode } from 'react';

/** A list table in its scrolling wrapper: `head` is the header row's cells, `children` the body rows. */
export function DataTable({ className, head, children }: { className: string; head: ReactNode; children: ReactNode }) {
  return (
    <div className="table-wrap">
      <table className={className}>
        <thead>
          <tr>{head}</tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

/** The header of a row-actions column: named for screen readers, blank on screen. */
export function ActionsHeader() {
  return (
    <th scope="col">
      <span className="visually-hidden">Actions</span>
    </th>
  );
}
