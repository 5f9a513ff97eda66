/**
 * A tiny stand-in for the control plane, run as its own process by the bench (so its work never stalls the
 * load generator's clock): serves one snapshot on the config stream (SSE, then pings), counts the usage
 * records the data plane posts (metering runs as in production), and answers `GET /count` with that count.
 *
 * usage: node bench/control-plane-stub.ts PORT SNAPSHOT_FILE
 */
import { readFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';

const [portArg, snapshotFile] = process.argv.slice(2);
if (portArg === undefined || snapshotFile === undefined) {
  console.error('usage: control-plane-stub.ts PORT SNAPSHOT_FILE');
  process.exit(2);
}
const snapshot = JSON.parse(readFileSync(snapshotFile, 'utf8')) as { version: number };
const snapshotEvent = `id: ${snapshot.version}\nevent: snapshot\ndata: ${JSON.stringify(snapshot)}\n\n`;
let records = 0;
const streams = new Set<ServerResponse>();

const json = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
};

const server = createServer((req, res) => {
  const url = req.url ?? '';
  if (req.method === 'GET' && url.startsWith('/internal/v1/config/stream')) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(snapshotEvent);
    streams.add(res);
    res.on('close', () => streams.delete(res));
    return;
  }
  if (req.method === 'GET' && url === '/count') return json(res, 200, { records });
  if (req.method === 'GET' && url === '/healthz') return json(res, 200, { ok: true });
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.method !== 'POST' || !url.startsWith('/internal/v1/usage')) return json(res, 404, { error: { message: 'bench control-plane stub' } });
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { records?: unknown };
      if (Array.isArray(body.records)) records += body.records.length;
    } catch {
      return json(res, 400, { error: { message: 'bad usage batch' } });
    }
    json(res, 200, { ok: true });
  });
});
setInterval(() => {
  for (const res of streams) res.write(': ping\n\n');
}, 10_000).unref();
server.listen(Number(portArg), '127.0.0.1');
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
