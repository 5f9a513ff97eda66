import type { LookupAddress } from 'node:dns';
import { describe, expect, it } from 'vitest';
import { AddressRefusedError, classifyAddress, createAddressGuard, parseCidrList, type ResolvedAddress } from './address-guard.ts';

/** A resolver that answers each name from a script, one answer per call (the last one repeats). */
function scriptedResolver(script: Record<string, (readonly string[])[]>) {
  const calls = new Map<string, number>();
  return async (hostname: string): Promise<readonly ResolvedAddress[]> => {
    const answers = script[hostname];
    if (!answers) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    const n = calls.get(hostname) ?? 0;
    calls.set(hostname, n + 1);
    const list = answers[Math.min(n, answers.length - 1)]!;
    return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

/** Calls a net-style lookup and returns what it answered. */
function callLookup(lookup: ReturnType<typeof createAddressGuard>['lookup'], hostname: string, all: boolean): Promise<LookupAddress[] | string> {
  return new Promise((resolve, reject) => {
    lookup(hostname, { all }, (err: NodeJS.ErrnoException | null, address: string | LookupAddress[]) => (err ? reject(err) : resolve(address)));
  });
}

describe('classifyAddress', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.1.2', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'shared'],
    ['169.254.169.254', 'link-local'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['192.0.2.10', 'documentation'],
    ['198.51.100.1', 'documentation'],
    ['203.0.113.9', 'documentation'],
    ['198.18.0.1', 'reserved'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456::1', 'unique-local'],
    ['fe80::1', 'link-local'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['fec0::1', 'reserved'],
    // IPv6 spellings of IPv4 addresses land where the IPv4 address does.
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['::127.0.0.1', 'loopback'],
    ['64:ff9b::7f00:1', 'loopback'],
    ['64:ff9b::a00:1', 'private'],
    ['2002:7f00:1::', 'loopback'],
    ['2002:c0a8:101::1', 'private'],
  ])('%s is %s', (ip, cls) => {
    expect(classifyAddress(ip)).toBe(cls);
  });

  it.each(['8.8.8.8', '1.1.1.1', '93.184.216.34', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808'])(
    '%s is public',
    (ip) => {
      expect(classifyAddress(ip)).toBeNull();
    },
  );
});

describe('address guard', () => {
  const strict = createAddressGuard({ resolve: scriptedResolver({}) });

  // WHATWG URL parsing (what the control plane does first) turns every numeric spelling into dotted form;
  // whatever survives, the guard sees an address literal and refuses it without resolving.
  it.each([
    'http://127.0.0.1:8001/',
    'http://2130706433/',
    'http://0x7f000001/',
    'http://0x7f.1/',
    'http://017700000001/',
    'http://127.1/',
    'http://0/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::1]:8001/',
    'http://[0:0:0:0:0:0:0:1]/',
    'http://169.254.169.254/latest/meta-data/',
    'http://[fd00::1]/',
    'http://10.0.0.5:8000/',
    'http://[64:ff9b::7f00:1]/',
  ])('refuses the literal %s', async (raw) => {
    await expect(strict.check(new URL(raw).hostname)).rejects.toBeInstanceOf(AddressRefusedError);
  });

  it('refuses a name when any of its addresses is internal, whatever the order', async () => {
    const guard = createAddressGuard({
      resolve: scriptedResolver({
        'runtime.example': [['93.184.216.34']],
        'mixed.example': [['93.184.216.34', '127.0.0.1']],
        '127.0.0.1.nip.io': [['127.0.0.1']],
        'metadata.example': [['169.254.169.254']],
        'v6.example': [['2606:4700:4700::1111', 'fd00::5']],
      }),
    });
    await expect(guard.check('runtime.example')).resolves.toEqual([{ address: '93.184.216.34', family: 4 }]);
    await expect(guard.check('mixed.example')).rejects.toMatchObject({ code: 'ADDRESS_REFUSED', address: '127.0.0.1', reason: 'loopback' });
    await expect(guard.check('127.0.0.1.nip.io')).rejects.toMatchObject({ reason: 'loopback' });
    await expect(guard.check('metadata.example')).rejects.toMatchObject({ reason: 'link-local' });
    await expect(guard.check('v6.example')).rejects.toMatchObject({ reason: 'unique-local' });
    await expect(guard.check('nowhere.example')).rejects.toMatchObject({ reason: 'unresolvable' });
  });

  it('resolves names through the real system resolver by default (localhost is loopback)', async () => {
    const guard = createAddressGuard();
    await expect(guard.check('localhost')).rejects.toMatchObject({ code: 'ADDRESS_REFUSED', reason: 'loopback' });
  });

  it('lets operators allow-list CIDRs, and development allow everything', async () => {
    const resolve = scriptedResolver({ 'vpc.example': [['10.20.1.5']], 'other.example': [['10.30.0.1']] });
    const guard = createAddressGuard({ allowedCidrs: parseCidrList('10.20.0.0/16, fd00::/8'), resolve });
    await expect(guard.check('vpc.example')).resolves.toHaveLength(1);
    await expect(guard.check('[fd00::9]')).resolves.toHaveLength(1);
    await expect(guard.check('::ffff:10.20.3.4')).resolves.toHaveLength(1);
    await expect(guard.check('other.example')).rejects.toBeInstanceOf(AddressRefusedError);
    await expect(guard.check('127.0.0.1')).rejects.toBeInstanceOf(AddressRefusedError);
    await expect(createAddressGuard({ allowAll: true }).check('127.0.0.1')).resolves.toHaveLength(1);
    expect(() => parseCidrList('10.0.0.0/33')).toThrow(/not a CIDR/);
    expect(() => parseCidrList('example.com')).toThrow(/not a CIDR/);
  });

  it('answers net.connect lookups only with checked addresses, so a rebound name is refused at connect time', async () => {
    // First answer public (what registration saw), then the attacker's DNS flips to loopback.
    const guard = createAddressGuard({ resolve: scriptedResolver({ 'rebind.example': [['93.184.216.34'], ['127.0.0.1']] }) });
    await expect(guard.check('rebind.example')).resolves.toHaveLength(1);
    await expect(callLookup(guard.lookup, 'rebind.example', true)).rejects.toMatchObject({ code: 'ADDRESS_REFUSED', address: '127.0.0.1' });

    const ok = createAddressGuard({ resolve: scriptedResolver({ 'runtime.example': [['93.184.216.34', '2606:4700:4700::1111']] }) });
    await expect(callLookup(ok.lookup, 'runtime.example', true)).resolves.toEqual([
      { address: '93.184.216.34', family: 4 },
      { address: '2606:4700:4700::1111', family: 6 },
    ]);
    await expect(callLookup(ok.lookup, 'runtime.example', false)).resolves.toBe('93.184.216.34');
  });
});
