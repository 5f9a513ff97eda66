import { CopyButton } from './copy-button.tsx';

/**
 * What a client needs to call a dedicated deployment, with copy buttons: on the deployment page and on
 * each card of the list (`compact`: shorter button labels, the card is narrow).
 */
export function DeploymentClientValues({ url, model, compact = false }: { url: string; model: string; compact?: boolean }) {
  return (
    <dl className="client-values">
      <div>
        <dt>API Base URL</dt>
        <dd>
          <code className="wrap" data-testid="deployment-url">
            {url}
          </code>{' '}
          {url && <CopyButton text={url} label={compact ? 'Copy URL' : 'Copy API Base URL'} />}
        </dd>
      </div>
      <div>
        <dt>Model Name</dt>
        <dd>
          <code className="wrap" data-testid="deployment-model">
            {model}
          </code>{' '}
          <CopyButton text={model} label={compact ? 'Copy' : 'Copy Model Name'} />
        </dd>
      </div>
    </dl>
  );
}
