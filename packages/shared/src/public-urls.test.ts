import { describe, expect, it } from 'vitest';
import { dedicatedBaseUrl, dedicatedModelName, endpointAddress, TENANT_PLACEHOLDER } from './public-urls.ts';

const urls = { sharedBaseUrl: 'https://api.example.com/endpoints/v1/', dataplaneUrl: 'https://api.example.com//' };

describe('public URLs and model names (one rule for the control plane and the console)', () => {
  it('builds the shared base and the dedicated base up to v1', () => {
    expect(endpointAddress(urls, { name: 'Llama-3.3-70B', provider: 'Meta' }, 'shared')).toEqual({
      apiBaseUrl: 'https://api.example.com/endpoints/v1',
      modelName: 'Llama-3.3-70B',
    });
    expect(endpointAddress(urls, { name: 'Llama-3.3-70B', provider: ' Meta ' }, 'dedicated', 'acme')).toEqual({
      apiBaseUrl: 'https://api.example.com/funccall/acme/endpoints/Llama-3.3-70B/v1',
      modelName: 'Meta/Llama-3.3-70B',
    });
  });

  it('encodes path segments but keeps the <tenant> placeholder readable', () => {
    expect(dedicatedBaseUrl(urls, 'a/b', 'x y')).toBe('https://api.example.com/funccall/a%2Fb/endpoints/x%20y/v1');
    expect(endpointAddress(urls, { name: 'm', provider: null }, 'dedicated').apiBaseUrl).toBe(
      `https://api.example.com/funccall/${TENANT_PLACEHOLDER}/endpoints/m/v1`,
    );
  });

  it('uses the Name alone when there is no provider', () => {
    expect(dedicatedModelName('Phi-4', null)).toBe('Phi-4');
    expect(dedicatedModelName('Phi-4', '  ')).toBe('Phi-4');
  });
});
