import { useId, useRef, type KeyboardEvent, type ReactNode } from 'react';

/** Accessible tabs (arrow keys move between tabs). */
export function Tabs<K extends string>(props: {
  label: string;
  tabs: readonly { key: K; label: string }[];
  value: NoInfer<K>;
  onChange(key: NoInfer<K>): void;
  children: ReactNode;
}) {
  const id = useId();
  const refs = useRef<(HTMLButtonElement | null)[]>([]);
  const onKey = (e: KeyboardEvent, i: number) => {
    const n = props.tabs.length;
    const next = e.key === 'ArrowRight' ? (i + 1) % n : e.key === 'ArrowLeft' ? (i - 1 + n) % n : e.key === 'Home' ? 0 : e.key === 'End' ? n - 1 : -1;
    if (next < 0) return;
    e.preventDefault();
    const tab = props.tabs[next];
    if (!tab) return;
    props.onChange(tab.key);
    refs.current[next]?.focus();
  };
  return (
    <div className="tabs">
      <div role="tablist" aria-label={props.label}>
        {props.tabs.map((t, i) => (
          <button
            key={t.key}
            ref={(el) => {
              refs.current[i] = el;
            }}
            type="button"
            role="tab"
            id={`${id}-tab-${t.key}`}
            aria-selected={props.value === t.key}
            aria-controls={`${id}-panel`}
            tabIndex={props.value === t.key ? 0 : -1}
            onClick={() => props.onChange(t.key)}
            onKeyDown={(e) => onKey(e, i)}
          >
            {t.label}
          </button>
        ))}
      </div>
      <div role="tabpanel" id={`${id}-panel`} aria-labelledby={`${id}-tab-${props.value}`} className="tabpanel">
        {props.children}
      </div>
    </div>
  );
}
