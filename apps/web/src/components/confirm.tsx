import { useEffect, useRef, type ReactNode } from 'react';

/** A modal confirmation on the native <dialog> (focus trap and Escape come with it). */
export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  children: ReactNode;
  confirmLabel: string;
  danger?: boolean;
  busy?: boolean;
  onConfirm(): void;
  onCancel(): void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog
      ref={ref}
      className="dialog"
      onCancel={(e) => {
        e.preventDefault();
        props.onCancel();
      }}
      aria-labelledby="confirm-title"
    >
      <h2 id="confirm-title">{props.title}</h2>
      <div>{props.children}</div>
      <div className="actions">
        <button type="button" onClick={props.onCancel} autoFocus>
          Cancel
        </button>
        <button type="button" className={props.danger ? 'danger' : 'primary'} onClick={props.onConfirm} disabled={props.busy}>
          {props.confirmLabel}
        </button>
      </div>
    </dialog>
  );
}
