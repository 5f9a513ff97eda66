// Keeps tenant-given addresses (external runtimes) off the platform's own network. The control plane
// checks at registration, and every connection to a tenant-given origin (control-plane probes, the
// data plane's upstream pools) resolves through `lookup` below, which checks every address it returns:
// what was checked is what is dialled, so a name that re-resolves to 127.0.0.1 later (DNS rebinding)
// is refused too. Node-only (node:dns, node:net): exported as `@infer/shared/address-guard`.
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { z } from 'zod';

/** Why an address is not public; null from `classifyAddress` means public. */
export type AddressClass = 'unspecified' | 'loopback' | 'private' | 'shared' | 'link-local' | 'multicast' | 'documentation' | 'reserved' | 'unique-local';

export interface ResolvedAddress {
  readonly address: string;
  /** 4 or 6. */
  readonly family: number;
}

/** Resolves a name to every address it has (the default is `dns.lookup` with `all: true`). */
export type Resolve = (hostname: string) => Promise<readonly ResolvedAddress[]>;

export class AddressRefusedError extends Error {
  readonly code = 'ADDRESS_REFUSED';
  readonly hostname: string;
  readonly address: string | null;
  readonly reason: AddressClass | 'unresolvable' | 'invalid';
  constructor(hostname: string, address: string | null, reason: AddressClass | 'unresolvable' | 'invalid') {
    const what =
      reason === 'unresolvable'
        ? 'does not resolve'
        : reason === 'invalid'
          ? 'is not a valid host'
          : address === null || address === hostname
            ? `is a ${reason} address`
            : `resolves to a ${reason} address`;
    super(`${hostname} ${what}; only public addresses are allowed`);
    this.name = 'AddressRefusedError';
    this.hostname = hostname;
    this.address = address;
    this.reason = reason;
  }
}

interface Range {
  readonly bytes: Uint8Array;
  readonly prefix: number;
}

/** 16 bytes for IPv6, 4 for IPv4; null when not an address literal. Accepts `[v6]`. */
export function addressBytes(raw: string): Uint8Array | null {
  const ip = raw.startsWith('[') && raw.endsWith(']') ? raw.slice(1, -1) : raw;
  const family = isIP(ip);
  if (family === 4) return Uint8Array.from(ip.split('.').map(Number));
  if (family !== 6) return null;
  let text = ip.replace(/%.*$/, ''); // zone id
  const dotted = /:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const tail = dotted[1]!.split('.').map(Number);
    text = `${text.slice(0, dotted.index)}:${((tail[0]! << 8) | tail[1]!).toString(16)}:${((tail[2]! << 8) | tail[3]!).toString(16)}`;
  }
  const [head = '', rest] = text.split('::');
  const groups = (s: string): number[] => (s === '' ? [] : s.split(':').map((g) => Number.parseInt(g, 16)));
  const left = groups(head);
  const right = rest === undefined ? [] : groups(rest);
  const words = [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  const out = new Uint8Array(16);
  words.forEach((w, i) => {
    out[i * 2] = w >> 8;
    out[i * 2 + 1] = w & 0xff;
  });
  return out;
}

function parseCidr(cidr: string): Range {
  const [ip = '', bits] = cidr.trim().split('/');
  const bytes = addressBytes(ip);
  const max = bytes ? bytes.length * 8 : 0;
  const prefix = bits === undefined ? max : Number(bits);
  if (!bytes || !/^\d*$/.test(bits ?? '') || !Number.isInteger(prefix) || prefix < 0 || prefix > max) {
    throw new Error(`${JSON.stringify(cidr)} is not a CIDR like 10.20.0.0/16 or fd00::/8`);
  }
  return { bytes, prefix };
}

function inRange(bytes: Uint8Array, r: Range): boolean {
  if (bytes.length !== r.bytes.length) return false;
  for (let bit = 0; bit < r.prefix; bit += 8) {
    const i = bit / 8;
    const mask = r.prefix - bit >= 8 ? 0xff : (0xff << (8 - (r.prefix - bit))) & 0xff;
    if ((bytes[i]! & mask) !== (r.bytes[i]! & mask)) return false;
  }
  return true;
}

const table = (entries: readonly (readonly [string, AddressClass])[]) => entries.map(([c, cls]) => ({ range: parseCidr(c), cls }));

// IANA special-purpose registries (RFC 6890 and successors): nothing here is a tenant's public runtime.
const v4Special = table([
  ['0.0.0.0/8', 'unspecified'],
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'shared'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'],
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'reserved'],
  ['192.0.2.0/24', 'documentation'],
  ['192.88.99.0/24', 'reserved'],
  ['192.168.0.0/16', 'private'],
  ['198.18.0.0/15', 'reserved'],
  ['198.51.100.0/24', 'documentation'],
  ['203.0.113.0/24', 'documentation'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'],
]);
const v6Special = table([
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['64:ff9b:1::/48', 'private'],
  ['100::/64', 'reserved'],
  ['2001::/23', 'reserved'],
  ['2001:db8::/32', 'documentation'],
  ['3fff::/20', 'documentation'],
  ['fc00::/7', 'unique-local'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'reserved'],
  ['ff00::/8', 'multicast'],
]);
// IPv6 forms that carry an IPv4 address the packet ends up at: mapped, compatible, NAT64, 6to4.
const embedsV4 = [
  { range: parseCidr('::ffff:0:0/96'), at: 12 },
  { range: parseCidr('::/96'), at: 12 },
  { range: parseCidr('64:ff9b::/96'), at: 12 },
  { range: parseCidr('2002::/16'), at: 2 },
];
const globalUnicast = parseCidr('2000::/3');

/** The IPv4 address an IPv6 address stands for (mapped, compatible, NAT64, 6to4), else the bytes as given. */
function effectiveBytes(bytes: Uint8Array): Uint8Array {
  if (bytes.length === 4) return bytes;
  for (const e of embedsV4) if (inRange(bytes, e.range)) return bytes.slice(e.at, e.at + 4);
  return bytes;
}

/** Why an address literal is not public, or null when it is. Throws on a non-address. */
export function classifyAddress(ip: string): AddressClass | null {
  const given = addressBytes(ip);
  if (!given) throw new Error(`${JSON.stringify(ip)} is not an IP address`);
  // :: and ::1 sit inside ::/96 (IPv4-compatible) but are themselves.
  if (given.length === 16 && given.subarray(0, 15).every((b) => b === 0) && given[15]! <= 1) return given[15] === 1 ? 'loopback' : 'unspecified';
  const bytes = effectiveBytes(given);
  if (bytes.length === 4) return v4Special.find((s) => inRange(bytes, s.range))?.cls ?? null;
  const special = v6Special.find((s) => inRange(bytes, s.range))?.cls;
  if (special) return special;
  return inRange(bytes, globalUnicast) ? null : 'reserved';
}

export interface AddressGuardOptions {
  /** Operator allow-list: CIDRs tenants' runtimes may use although they are not public (e.g. a peered VPC). */
  readonly allowedCidrs?: readonly string[];
  /** Allow every address (development and tests only: the guard then only resolves). */
  readonly allowAll?: boolean;
  /** Name resolution (tests inject one; default `dns.lookup` with `all: true`). */
  readonly resolve?: Resolve;
}

export interface AddressGuard {
  /** Null when `ip` may be dialled, else why not. */
  refusal(ip: string): AddressClass | null;
  /** Resolves `hostname` (a name, an IP literal or `[v6]`) and throws AddressRefusedError unless every address may be dialled. */
  check(hostname: string): Promise<readonly ResolvedAddress[]>;
  /** A `net.connect` lookup that only ever answers with checked addresses (pins the connection to them). */
  readonly lookup: LookupFunction;
}

const defaultResolve: Resolve = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/** Parses a comma- or space-separated CIDR list; throws naming the first bad entry. */
export function parseCidrList(text: string | undefined): readonly string[] {
  const list = (text ?? '').split(/[\s,]+/).filter((c) => c.length > 0);
  for (const c of list) parseCidr(c);
  return Object.freeze(list);
}

/** An env variable holding a CIDR list (ALLOWED_PRIVATE_CIDRS on both planes): the bad entry becomes the variable's issue. */
export const cidrListEnv = z
  .string()
  .optional()
  .transform((v, ctx) => {
    try {
      return parseCidrList(v);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
      return z.NEVER;
    }
  });

export function createAddressGuard(opts: AddressGuardOptions = {}): AddressGuard {
  const allowed = (opts.allowedCidrs ?? []).map(parseCidr);
  const allowAll = opts.allowAll === true;
  const resolve = opts.resolve ?? defaultResolve;

  const refusal = (ip: string): AddressClass | null => {
    if (allowAll) return null;
    const cls = classifyAddress(ip);
    if (cls === null) return null;
    const given = addressBytes(ip)!;
    const bytes = effectiveBytes(given);
    return allowed.some((r) => inRange(bytes, r) || inRange(given, r)) ? null : cls;
  };

  const check = async (host: string): Promise<readonly ResolvedAddress[]> => {
    const hostname = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
    if (hostname === '') throw new AddressRefusedError(host, null, 'invalid');
    const family = isIP(hostname);
    let addresses: readonly ResolvedAddress[];
    if (family !== 0) addresses = [{ address: hostname, family }];
    else {
      try {
        addresses = await resolve(hostname);
      } catch {
        throw new AddressRefusedError(hostname, null, 'unresolvable');
      }
      if (addresses.length === 0) throw new AddressRefusedError(hostname, null, 'unresolvable');
    }
    // Every address, not the first: a client may pick any of them, and an attacker controls the order.
    for (const a of addresses) {
      const why = refusal(a.address);
      if (why !== null) throw new AddressRefusedError(hostname, a.address, why);
    }
    return addresses;
  };

  const lookup = ((
    hostname: string,
    options: { all?: boolean; family?: number | string } | number | undefined,
    callback: (...args: unknown[]) => void,
  ): void => {
    const cb = typeof options === 'function' ? (options as (...args: unknown[]) => void) : callback;
    const all = typeof options === 'object' && options !== null && options.all === true;
    const wanted = typeof options === 'object' && options !== null ? Number(options.family ?? 0) : Number(options ?? 0);
    check(hostname).then(
      (addresses) => {
        const usable = wanted === 4 || wanted === 6 ? addresses.filter((a) => a.family === wanted) : addresses;
        if (usable.length === 0) {
          cb(Object.assign(new Error(`${hostname} has no IPv${wanted} address`), { code: 'ENOTFOUND' }));
        } else if (all)
          cb(
            null,
            usable.map((a) => ({ address: a.address, family: a.family })),
          );
        else cb(null, usable[0]!.address, usable[0]!.family);
      },
      (err: unknown) => cb(err),
    );
  }) as LookupFunction;

  return Object.freeze({ refusal, check, lookup });
}

type ConnectCallback = (err: Error | null, socket: null) => void;
type Connector = (options: { hostname: string }, callback: ConnectCallback) => unknown;

/**
 * Wraps an undici connector built with `lookup: guard.lookup` so that origins given as IP literals (which
 * `net.connect` dials without a lookup) are checked too. Every connection then fails with
 * AddressRefusedError before a byte is sent to a refused address.
 */
export function guardConnector<C extends (options: never, callback: never) => unknown>(guard: AddressGuard, base: C): C {
  const inner = base as unknown as Connector;
  const wrapped: Connector = (options, callback) => {
    const host = options.hostname.startsWith('[') ? options.hostname.slice(1, -1) : options.hostname;
    if (isIP(host) !== 0) {
      const why = guard.refusal(host);
      if (why !== null) {
        queueMicrotask(() => callback(new AddressRefusedError(host, host, why), null));
        return undefined;
      }
    }
    return inner(options, callback);
  };
  return wrapped as unknown as C;
}
